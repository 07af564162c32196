"""The domain's words (conda_distro.vocab): parsed once, ordered as versions, and read and written as the
text and tuples documents held before these types existed."""

from __future__ import annotations

import json
import pickle
import re
import subprocess
from pathlib import Path

import pytest

from conda_distro.sweep.model import BLOCKING, FAILURES, STATUSES
from conda_distro.vocab import CUDA_VERSION, Release, SweepStatus, Target, Variant

PACKAGE = Path(__file__).resolve().parent.parent / "distro" / "conda_distro"


def test_release_is_parsed_once_and_ordered_as_a_version():
    r = Release("2.10.1")
    assert r.parts == (2, 10, 1) and r.minor == "2.10" and r.major_minor == (2, 10) and r.next_minor == "2.11"
    assert str(r) == "2.10.1" and json.dumps([r]) == '["2.10.1"]' and f"{r}" == "2.10.1"
    assert sorted([Release("2.10.0"), Release("2.9.1"), Release("2.9.0")]) == ["2.9.0", "2.9.1", "2.10.0"]
    assert Release("2.9.0") < "2.10.0" and Release("2.9.0") < "2.10.0"  # a plain string compares as a version
    assert {"2.5.0": 1}[Release("2.5.0")] == 1 and Release(r) is r
    assert pickle.loads(pickle.dumps(r)).minor == "2.10"
    for bad in ("2.5", "2.05.0", "x.y.z", "2.5.0a0"):
        with pytest.raises(ValueError, match="MAJOR.MINOR.PATCH"):
            Release(bad)


def test_variant_says_what_it_needs():
    assert [str(v) for v in Variant] == ["cpu", "cuda"] and Variant("cuda") is Variant.CUDA
    assert Variant.CUDA.cuda and not Variant.CPU.cuda
    assert Variant.CUDA.cuda_override == CUDA_VERSION and Variant.CPU.cuda_override == ""
    assert json.dumps({"variant": Variant.CUDA}) == '{"variant": "cuda"}'
    names = {str(p.name.normalized): str(p.version) for p in Variant.CUDA.virtual_packages()}
    assert names["__cuda"] == CUDA_VERSION
    assert "__cuda" not in {str(p.name.normalized) for p in Variant.CPU.virtual_packages()}


def test_target_is_the_tuple_documents_key_by():
    t = Target("2.5.0", "cuda")
    assert isinstance(t.release, Release) and t.variant is Variant.CUDA
    assert t == ("2.5.0", "cuda") and {("2.5.0", "cuda"): "x"}[t] == "x"
    release, variant = t
    assert (release, variant) == ("2.5.0", "cuda") and str(t) == "2.5.0/cuda" and t.spelled() == "pytorch 2.5.0 cuda"
    assert pickle.loads(pickle.dumps(t)) == t and Target("2.5", "cpu").release == "2.5"  # not a release: kept as text
    assert sorted([Target("2.10.0", "cpu"), Target("2.9.0", "cuda"), Target("2.9.0", "cpu")]) == \
        [("2.9.0", "cpu"), ("2.9.0", "cuda"), ("2.10.0", "cpu")]
    with pytest.raises(ValueError):
        Target("2.5.0", "rocm")


def test_sweep_statuses_classify_themselves():
    assert tuple(SweepStatus) == STATUSES and [str(s) for s in STATUSES][:2] == ["unchanged", "bumped"]
    assert set(FAILURES) == {"failed", "not-solvable", "unreadable"}
    assert set(BLOCKING) == set(STATUSES) - {"unchanged", "bumped"}
    assert all(s.is_blocking for s in SweepStatus if s.is_failure)


def test_no_cuda_string_comparisons_or_tuple_targets_outside_the_vocabulary():
    """The words live in one place: no ``== "cuda"`` (or ``"cpu"``) and no ``tuple[str, Variant]`` target
    anywhere else in the package."""
    found = subprocess.run(["grep", "-rnE", r"""[=!]= ?["'](cuda|cpu)["']|["'](cuda|cpu)["'] ?[=!]=|tuple\[str, Variant\]""",
                            "--include=*.py", str(PACKAGE)], capture_output=True, text=True, timeout=120).stdout
    offenders = [line for line in found.splitlines() if not re.match(rf"{re.escape(str(PACKAGE))}/vocab\.py:", line)]
    assert offenders == []
