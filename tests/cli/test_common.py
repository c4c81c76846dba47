"""The endings every command shares (cli.common): the options answered alike,
in their place in the order, and controller failures in Slurm's words."""
from __future__ import annotations

import io

import grpc
import pytest

from cli import sacct, scancel, sinfo, squeue
from cli.common import CommandError, controller_errors
from lingjun.client import ControllerUnreachable
from tests.cli.test_commands import RpcFailure


def run(main, argv):
    out, err = io.StringIO(), io.StringIO()
    rc = main(argv, api=None, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


COMMANDS = [squeue.main, sinfo.main, scancel.main, sacct.main]
NAMES = ["squeue", "sinfo", "scancel", "sacct"]


@pytest.mark.parametrize("main", COMMANDS, ids=NAMES)
def test_version_is_slurms_and_exits_0(main):
    assert run(main, ["-V"]) == (0, "slurm 22.05.8\n", "")


@pytest.mark.parametrize("main,prog,option", [
    (squeue.main, "squeue", "--steps"), (sinfo.main, "sinfo", "--reservation"),
    (scancel.main, "scancel", "-i"), (sacct.main, "sacct", "--wckeys"),
], ids=NAMES)
def test_an_unsupported_option_is_refused_as_spelled_before_a_later_help(main, prog, option):
    assert run(main, [option, "--help"]) == (
        1, "", f"{prog}: error: {option} is not supported yet\n")


@pytest.mark.parametrize("main,argv,want", [
    (sinfo.main, ["-t", "sleepy", "--help"], (1, "", "sinfo: error: Invalid node state specified: sleepy\n")),
    (scancel.main, ["-s", "BOGUS", "--usage"], (1, "", "scancel: error: Invalid job signal: BOGUS\n")),
    (sacct.main, ["-s", "bogus", "-V"], (1, "", "sacct: error: Invalid state: bogus\n")),
], ids=["sinfo: a bad -t before --help is the error",
        "scancel: a bad -s before --usage is the error",
        "sacct: a bad -s before -V is the error"])
def test_options_are_answered_in_order(main, argv, want):
    assert run(main, argv) == want


@pytest.mark.parametrize("main", COMMANDS, ids=NAMES)
def test_help_before_a_bad_value_is_the_help(main):
    rc, out, err = run(main, ["--help", "-t", "bogus"] if main is not sacct.main
                       else ["--help", "-s", "bogus"])
    assert (rc, err) == (0, "") and out.startswith("Usage: ")


@pytest.mark.parametrize("raised,not_found,want", [
    (ControllerUnreachable("x"), None,
     "slurm_load_node error: Unable to contact slurm controller (connect failure)"),
    (RpcFailure(grpc.StatusCode.PERMISSION_DENIED, "Access/permission denied"), "Node n not found",
     "slurm_load_node error: Access/permission denied"),
    (RpcFailure(grpc.StatusCode.NOT_FOUND, "Invalid node name specified"), "Node n not found",
     "Node n not found"),
    (RpcFailure(grpc.StatusCode.NOT_FOUND, "Invalid node name specified"), None,
     "slurm_load_node error: Invalid node name specified"),
], ids=["an unreachable controller is the connect failure",
        "a refusal is the controller's own text after the prefix",
        "NOT_FOUND is the command's own sentence when it has one",
        "NOT_FOUND is the controller's text when the command has none"])
def test_controller_errors_speak_slurm(raised, not_found, want):
    with pytest.raises(CommandError) as got:
        with controller_errors("slurm_load_node error: ", not_found=not_found):
            raise raised
    assert (got.value.message, got.value.rc) == (want, 1)


def test_a_command_called_with_its_streams_returns_and_the_process_goes_on():
    """exit_now ends only a whole process (the console script's call): a caller
    that hands argv, api or streams gets the status back."""
    from cli.common import run
    out, err = io.StringIO(), io.StringIO()
    assert run(lambda argv, api, out, err: out.write("x") and 3, [], None, out, err,
               exit_now=True) == 3
    assert out.getvalue() == "x"


def test_a_whole_command_process_ends_with_its_status_and_all_its_output(tmp_path):
    import subprocess
    import sys
    code = ("import sys\nfrom cli.common import run, CommandError\n"
            "def body(argv, api, out, err):\n"
            "    out.write('partial line without newline')\n"
            "    raise CommandError('cmd: error: ' + ' '.join(argv), 7)\n"
            "sys.exit(run(body, None, None, None, None, exit_now=True))\n")
    p = subprocess.run([sys.executable, "-c", code, "a", "b"], capture_output=True, text=True,
                       timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (7, "partial line without newline", "cmd: error: a b\n")


def _script(tmp_path, name: str, body: str) -> list[str]:
    """argv of a script named like a console script, run by this interpreter from this tree."""
    import sys
    from pathlib import Path
    script = tmp_path / name
    script.write_text(f"import sys\nsys.path.insert(0, {str(Path(__file__).parents[2])!r})\n" + body)
    return [sys.executable, str(script)]


def test_a_command_loads_with_the_collector_paused_and_runs_with_it_resumed(tmp_path):
    """Loading a command's modules is most of its run; the collector's scans of
    them cost ~1 ms (bench/README.md). The command's own work gets it back."""
    import subprocess
    body = ("import gc\nfrom cli.common import run\n"
            "during_load = gc.isenabled()\n"
            "def body(argv, api, out, err):\n"
            "    out.write(f'{during_load} {gc.isenabled()}')\n"
            "    return 0\n"
            "sys.exit(run(body, None, None, None, None))\n")
    p = subprocess.run(_script(tmp_path, "squeue", body), capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (0, "False True", "")


def test_importing_the_commands_elsewhere_leaves_the_collector_running(tmp_path):
    """The SDK, lingjun restd and tests import cli.*: their collector is theirs."""
    import subprocess
    body = "import gc\nimport cli.sbatch, cli.squeue\nprint(gc.isenabled())\n"
    p = subprocess.run(_script(tmp_path, "workflow.py", body), capture_output=True, text=True,
                       timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (0, "True\n", "")


def test_every_command_script_loads_with_the_collector_paused():
    """cli.COMMANDS names the console scripts that are commands: a new one
    added to pyproject.toml only would load at the collector's full cost."""
    import tomllib
    from pathlib import Path
    import cli
    scripts = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())[
        "project"]["scripts"]
    commands = {name for name, target in scripts.items()
                if target.startswith("cli.") and name != "lingjun"}
    assert cli.COMMANDS == commands
