"""The main job (cozmo-demo) runs to completion against the built-in simulator."""

from __future__ import annotations

import re

import pytest

from cozmo_driver import demo


@pytest.mark.slow
def test_demo_drives_the_simulated_robot_and_reports_matching_poses(capsys):
    assert demo.main(["--duration", "40", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "robot ready: firmware 2381" in out
    assert re.search(r"ready\s+rtt\s+[\d.]+ ms\s+state\s+3\d\.\d Hz\s+camera\s+1[3-7]\.\d fps", out)
    assert out.count("TurnInPlace +90 deg") == 4
    assert "was not acknowledged" not in out
    reported = re.search(r"reported pose x (-?[\d.]+) mm, y (-?[\d.]+) mm, yaw (-?[\d.]+) deg; "
                         r"simulator truth x (-?[\d.]+) mm, y (-?[\d.]+) mm, yaw (-?[\d.]+) deg", out)
    assert reported, out[-2000:]
    rx, ry, ryaw, tx, ty, tyaw = map(float, reported.groups())
    assert abs(rx - tx) < 2.0 and abs(ry - ty) < 2.0 and abs(ryaw - tyaw) < 2.0
    assert abs(tx) < 30.0 and abs(ty) < 30.0  # the square closes
    images = int(re.search(r"camera images completed: (\d+)", out).group(1))
    assert images > 100
    assert "malformed dropped 0" in out
    assert out.rstrip().endswith("done.")


def test_demo_rejects_a_bad_duration(capsys):
    with pytest.raises(SystemExit):
        demo.main(["--duration", "-1"])
    assert "--duration must be a positive number" in capsys.readouterr().err
