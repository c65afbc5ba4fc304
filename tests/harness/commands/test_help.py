"""What the commands' help tells about viewing results."""

from __future__ import annotations

import pytest

from fusebench.cli import main


@pytest.mark.parametrize("command", ["run", "report"])
def test_help_says_to_view_asvs_site_with_asv_preview(command: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "`asv publish`, then `asv preview`" in text or "`asv publish`, then view it with `asv preview`" in text
