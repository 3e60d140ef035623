"""The laplace-torch suite plugin's comparison of two runs' outcomes."""

from __future__ import annotations

from benchmarks import laplace_torch_suite

REPORT = """<testsuites><testsuite>
<testcase classname="tests.a" name="test_ok"/>
<testcase classname="tests.a" name="test_bad"><failure message="x"/></testcase>
<testcase classname="tests.a" name="test_broken"><error message="x"/></testcase>
<testcase classname="tests.a" name="test_off"><skipped message="x"/></testcase>
</testsuite></testsuites>"""


def test_outcomes_read_every_status_of_a_junit_report(tmp_path):
    path = tmp_path / "run.xml"
    path.write_text(REPORT)
    assert laplace_torch_suite.outcomes(str(path)) == {
        "tests.a::test_ok": "passed",
        "tests.a::test_bad": "failed",
        "tests.a::test_broken": "error",
        "tests.a::test_off": "skipped",
    }
