"""`python -m tests.fakes.interrupted_in_eval`: the command line with one more command, `interrupt`,
whose Ctrl-C arrives inside a string `eval` (as one landing while typer evaluates the commands'
string annotations does): it must still end in one line and exit 1."""

from harness.cli.app import app, main


@app.command()
def interrupt() -> None:
    eval("(_ for _ in ()).throw(KeyboardInterrupt)")


main()
