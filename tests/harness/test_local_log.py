"""The local model's server log stays off the terminal; the progress lines do not (no model needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_native_output_goes_to_the_log_and_python_lines_to_the_terminal(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    code = (
        "import os, sys\n"
        "from harness.running.local import NativeStderr\n"
        "from harness.running.progress import Progress\n"
        "progress = Progress()\n"
        f"with NativeStderr(__import__('pathlib').Path({str(log)!r})):\n"
        "    os.write(2, b'llama.cpp request log\\n')\n"
        "    progress.note('progress line')\n"
        "os.write(2, b'after\\n')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "llama.cpp request log" in log.read_text(encoding="utf-8")
    assert "llama.cpp" not in result.stderr
    assert "progress line" in result.stderr and "progress line" not in log.read_text(encoding="utf-8")
    assert result.stderr.rstrip().endswith("after")  # fd 2 is back on the terminal afterwards
