"""A learned EAGLE-3 drafter for the real test-bed model (SmolLM2-135M-Instruct).

`prompts` builds the training prompts (GSM8K train questions, random-token prompts on their own
seed: never an evaluated prompt), `eagle3` is the one-layer draft network in the form SGLang, vLLM
and llama.cpp read, `train` is the GPU recipe that distils it from the model's own continuations,
and `artifact` assembles the pinned weights kept in the repository into a servable folder and GGUF.
"""
