"""Other tools' results imported into run folders (`sparkbench import`): one module per tool's format,
`detect` to tell them apart, `folder` to write what they read."""
