"""Dependency spec analysis (conda_distro.recipe.specs): parsing, bounds, granularity, admission; fuzzed."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conda_distro.recipe import specs
from conda_distro.recipe.specs import (
    admits,
    admitted_minors,
    granularity_name,
    has_upper_bound,
    minor_of,
    next_minor_bound,
    parse_spec,
    pin_granularity,
    upper_granularity,
)


@pytest.mark.parametrize("text,name,version,build", [
    ("pytorch >=2.4,<2.7", "pytorch", ">=2.4,<2.7", None),
    ("pytorch >=2.4, <2.7", "pytorch", ">=2.4,<2.7", None),
    ("pytorch 2.5.*", "pytorch", "2.5.*", None),
    ("pytorch =2.5", "pytorch", "2.5.*", None),
    ("pytorch", "pytorch", None, None),
    ("PyTorch >=2.4", "pytorch", ">=2.4", None),
    ("pytorch * cuda*", "pytorch", "*", "cuda*"),
    ('pytorch[version=">=2.4,<2.7"]', "pytorch", ">=2.4,<2.7", None),
    ("__cuda >=12", "__cuda", ">=12", None),
])
def test_parse_spec(text, name, version, build):
    p = parse_spec(text)
    assert p.ok and (p.name, p.version, p.build) == (name, version, build)


@pytest.mark.parametrize("text,words", [
    ("pytorch >=2,,<3", "cannot parse|unable to parse|doubled"),
    ("pytorch 2.5", "==2.5"),
    ("pytorch ==2.5.*", "incompatible"),
    (">=2.4", ""),
    ("", ""),
])
def test_parse_spec_errors_never_raise(text, words):
    import re

    p = parse_spec(text)
    assert not p.ok and p.error
    assert re.search(words, p.error), p.error


@pytest.mark.parametrize("version,granularity", [
    (">=2.4,<2.7", 2),
    (">=2.4.0,<2.7.0a0", 2),  # conda-forge's run_exports spelling
    (">=2.4.0,<2.7.0.dev0", 2),
    ("<2.7", 2),
    ("2.5.*", 2),
    ("~=2.5.0", 2),
    (">=2.4,<3", 1),
    (">=2.4,<3.0", 1),
    (">=2.4,<3.0.0a0", 1),
    ("2.*", 1),
    ("~=2.5", 1),
    (">=2.4,<2.6.2", 3),
    ("2.5.1.*", 3),
    ("<=2.5", 3),  # admits 2.5 but not 2.5.1
    ("<=2.5.1", 3),
    ("==2.5.1", 99),
    (">=2.4,<2.6|>=3.1,<3.2", 2),
    (">=2.4,<2.6|2.7.*", 2),
    (">=2.4,<2.6.1|>=3,<4", 1),  # the coarsest branch
    ("!=2.5.0,<2.7", 2),
    (">=2.4", None),
    (">=2.4,!=2.5.0", None),
    (">=2.4|<3", None),
    ("*", None),
    (None, None),
    ("", None),
])
def test_upper_granularity(version, granularity):
    assert upper_granularity(version) == granularity
    assert has_upper_bound(version) is (granularity is not None)


def test_granularity_names():
    assert [granularity_name(g) for g in (None, 1, 2, 3, 4, 99)] == ["unbounded", "major", "minor", "patch", "patch", "exact"]


@pytest.mark.parametrize("expr,g", [("x", 1), ("x.x", 2), ("x.x.x", 3), ("X.X", 2), ("", 1)])
def test_pin_granularity(expr, g):
    assert pin_granularity(expr) == g


@pytest.mark.parametrize("version,release,ok", [
    (">=2.4,<2.7", "2.6.0", True),
    (">=2.4,<2.7", "2.7.0", False),
    (">=2.4,<2.7", "2.4.1", True),
    ("2.5.*", "2.5.1", True),
    ("2.5.*", "2.6.0", False),
    (None, "9.9.9", True),
    ("", "1.0", True),
    ("not a spec", "1.0", False),
    (">=1", "not a version!", False),
])
def test_admits(version, release, ok):
    assert admits(version, release) is ok


def test_admitted_minors_and_release_helpers():
    assert admitted_minors(">=2.5,<2.6") == {(2, 5)}
    assert admitted_minors("2.5.*") == {(2, 5)}
    assert admitted_minors(">=2.4,<2.7") == {(2, 4), (2, 5), (2, 6)}
    assert minor_of("2.10.1") == (2, 10)
    assert next_minor_bound("2.7.0") == "2.8" and next_minor_bound("2.9.1") == "2.10"


# ---------------------------------------------------------------------------------------------
# fuzz

SPEC_CHARS = st.sampled_from(list("0123456789.,<>=!~*|() abcdevr_-+$[]{}\"'\\\n\t"))
ANY_TEXT = st.one_of(st.text(max_size=40), st.text(alphabet=SPEC_CHARS, max_size=40))
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(ANY_TEXT, ANY_TEXT)
def test_spec_functions_never_raise_on_arbitrary_text(version, release):
    g = upper_granularity(version)
    assert g is None or g >= 1
    assert isinstance(has_upper_bound(version), bool)
    assert isinstance(admits(version, release), bool)
    assert granularity_name(g) in ("unbounded", "major", "minor", "patch", "exact")
    p = parse_spec(version)
    assert p.ok or p.error
    if p.ok:
        upper_granularity(p.version)


num = st.integers(min_value=0, max_value=30)


@FUZZ
@given(num, num, num, num)
def test_minor_bounds_have_minor_granularity(a, b, c, d):
    version = parse_spec(f"pkg >={a}.{b},<{c}.{d}").version
    assert upper_granularity(version) == (2 if d != 0 else 1)
    assert has_upper_bound(version)


@FUZZ
@given(num, num, num)
def test_conda_forge_run_exports_are_minor(a, b, c):
    # pytorch's run_exports: 'pytorch >=A.B.C,<A.(B+1).0a0'
    version = parse_spec(f"pytorch >={a}.{b}.{c},<{a}.{b + 1}.0a0").version
    assert upper_granularity(version) == 2
    assert admits(version, f"{a}.{b}.{c}") and not admits(version, f"{a}.{b + 1}.0")


@FUZZ
@given(num, num, num)
def test_a_bound_admits_what_is_below_it_and_not_itself(a, b, c):
    version = f">=0,<{a}.{b}.{c + 1}"
    assert not admits(version, f"{a}.{b}.{c + 1}")
    assert admits(version, f"{a}.{b}.{c}")


def test_caches_do_not_leak_mutable_results():
    first = admitted_minors(">=2.4,<2.6")
    with pytest.raises(AttributeError):
        first.add((9, 9))  # frozenset: a cached answer cannot be changed by a caller
    assert specs.admitted_minors(">=2.4,<2.6") == {(2, 4), (2, 5)}


# ---------------------------------------------------------------------------------------------
# the sweep's edit of a spec: only the version part is widened


@pytest.mark.parametrize("text,expected", [
    ("pytorch 2.10.* *cuda*", "pytorch >=2.10,<2.12 *cuda*"),
    ("pytorch >=2.9,<2.11", "pytorch >=2.9,<2.12"),
    ("pytorch >=2.9,<2.11.0a0", "pytorch >=2.9,<2.12.0a0"),
    ("pytorch >=2.4, <2.7", "pytorch >=2.4,<2.12"),
    ("pytorch>=2.9,<2.11", "pytorch>=2.9,<2.12"),
    ("pytorch>=2.9,<2.11 *cuda*", "pytorch>=2.9,<2.12 *cuda*"),
    ("pytorch >=2.9,<2.11 cuda*_0", "pytorch >=2.9,<2.12 cuda*_0"),
    ("pytorch =2.10", "pytorch >=2.10,<2.12"),
    ("pytorch=2.10", "pytorch >=2.10,<2.12"),
    ("pytorch ~=2.10.0", "pytorch >=2.10.0,<2.12"),
    ("pytorch >=2.9,<2.11 [build=*cuda*]", "pytorch >=2.9,<2.12 [build=*cuda*]"),
    ('pytorch[version=">=2.9,<2.11", build=*cuda*]', 'pytorch[version=">=2.9,<2.12", build=*cuda*]'),
    ("pytorch [version='2.10.*']", "pytorch [version='>=2.10,<2.12']"),
    ("pytorch[version=2.10.*]", 'pytorch[version=">=2.10,<2.12"]'),
    ("conda-forge::pytorch >=2.9,<2.11", "conda-forge::pytorch >=2.9,<2.12"),
    ("conda-forge::pytorch 2.10.* *cuda*", "conda-forge::pytorch >=2.10,<2.12 *cuda*"),
    ("conda-forge/linux-64::pytorch 2.10.*", "conda-forge/linux-64::pytorch >=2.10,<2.12"),
    ("pytorch * [build=*cuda*]", "pytorch * [build=*cuda*]"),  # no version constraint: nothing to widen
    ("pytorch", "pytorch"),
])
def test_widen_spec_changes_the_version_part_only(text, expected):
    from rattler import MatchSpec

    out = specs.widen_spec(text, "2.11.0", supported=("2.9.1", "2.10.0"))
    assert out == expected
    old, new = MatchSpec(text, strict=True), MatchSpec(out, strict=True)
    assert (new.name.normalized, new.build, str(new.channel), new.subdir) == (old.name.normalized, old.build, str(old.channel), old.subdir)
    assert admits(new.version, "2.11.0")


@pytest.mark.parametrize("text,words", [
    ("pytorch ==2.10.0", "still does not admit pytorch 2.11.0"),
    ("pytorch >=2.4,<2.6|2.6.*", "still does not admit pytorch 2.11.0"),
    ("pytorch >=2.4,<2.7=*cuda*", "not a valid spec"),
])
def test_widen_spec_refuses_what_it_cannot_widen(text, words):
    with pytest.raises(specs.SpecEditError, match=words):
        specs.widen_spec(text, "2.11.0")


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(lo=st.integers(0, 9), span=st.integers(1, 3), build=st.sampled_from(["", " *cuda*", " [build=*cpu*]", " cuda*_0"]),
       channel=st.sampled_from(["", "conda-forge::"]), minor=st.integers(10, 14))
def test_widen_spec_property(lo, span, build, channel, minor):
    """Whatever the spec's shape: the widened spec keeps name, channel and build, admits the release
    and everything the old one admitted."""
    from rattler import MatchSpec

    text = f"{channel}pytorch >=2.{lo},<2.{lo + span}{build}"
    release = f"2.{minor}.0"
    out = specs.widen_spec(text, release)
    old, new = MatchSpec(text, strict=True), MatchSpec(out, strict=True)
    assert (new.build, str(new.channel)) == (old.build, str(old.channel))
    assert out.endswith(build) and out.startswith(f"{channel}pytorch ")
    assert admits(new.version, release)
    assert all(admits(new.version, f"2.{m}.{p}") for m in range(lo, lo + span) for p in (0, 3))
