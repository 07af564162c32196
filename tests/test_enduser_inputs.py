"""`snapshots` and `rollback` on bad inputs: exit 2, a message naming the file or option, nothing written."""

from __future__ import annotations

from support.helpers import run_cli_at, run_json_at


def test_no_snapshots_yet(make_distro, capsys):
    root = make_distro({})
    code, doc = run_json_at(capsys, root, "snapshots")
    assert code == 0 and doc["snapshots"] == [] and doc["current"] is None
    code, out, err = run_cli_at(capsys, root, "rollback", "--to", "snapshot-20261201-1", "--why", "x")
    assert code == 2 and out == "" and "there is no snapshot snapshot-20261201-1" in err and "promote first" in err
    assert not (root / "channel_state").exists()


def test_a_damaged_snapshot_record_is_exit_2_naming_it(make_distro, capsys):
    root = make_distro({})
    record = root / "channel_state" / "snapshots" / "snapshot-20261201-1.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"schema_version": 1, "name": "snapshot-20261201-1"}')
    for argv in (("snapshots",), ("rollback", "--to", "snapshot-20261201-1", "--why", "x")):
        code, out, err = run_cli_at(capsys, root, *argv)
        assert code == 2 and out == "" and "Traceback" not in err, argv
        assert "snapshot-20261201-1.json" in err and "invalid snapshot record" in err, err
    record.write_text("{not json")
    code, out, err = run_cli_at(capsys, root, "snapshots")
    assert code == 2 and "snapshot-20261201-1.json" in err and "Traceback" not in err
    assert record.read_text() == "{not json"


def test_rollback_options_are_checked_before_anything_is_read(make_distro, capsys):
    root = make_distro({})
    for argv, words in ((("--to", "../../etc"), "not a snapshot name"), (("--to", "snapshot-20261301-0"), "not a snapshot name"),
                        (("--to", "snapshot-20261201-1"), "needs a reason")):
        code, out, err = run_cli_at(capsys, root, "rollback", *argv)
        assert code == 2 and out == "" and words in err and "--" in err, (argv, err)
