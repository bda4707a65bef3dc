"The command line as a shell runs it, for the bad-input tests: its exit code and output, and its one-line errors."
import contextlib
import io

from omni_npu_port.cli.main import main


def run(argv):
    "`main(argv)` as a shell runs it: (exit code, stdout, stderr)."
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err): rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def one_line(err, cmd, *words):
    "stderr is exactly one error line of `cmd`, naming every word, with no traceback."
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"omni-npu-port {cmd}: error: "), err
    for w in words: assert str(w) in err, (w, err)
