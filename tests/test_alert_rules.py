"""The alert rules in deploy/prometheus/: promtool checks them and runs their
unit tests (Debian's `prometheus` package; .ci/run installs it); where it is
missing, PyYAML reads them and the shape promtool would check is checked
here. Either way, every series a rule names is one our collectors export: a
renamed metric must not leave an alert silently watching nothing."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "deploy" / "prometheus" / "lingjun-rules.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "lingjun-rules.test.yml"
COLLECTORS = (ROOT / "lingjund" / "metrics.py", ROOT / "lingjun_agent" / "metrics.py")


def exported_names() -> set[str]:
    """Every series name the collectors make: gauges as named, counters with
    _total, histograms with _bucket, _sum and _count."""
    names: set[str] = set()
    for path in COLLECTORS:
        text = path.read_text()
        for kind, name in re.findall(r'(\w+)\(\s*f?"(lingjun_\w+)"', text):
            if kind == "CounterMetricFamily":
                names.add(name + "_total")
            elif kind == "Histogram":
                names.update(name + s for s in ("_bucket", "_sum", "_count"))
            else:
                names.add(name)
    # f"lingjun_partition_{what}" for what in ("gpus", "cpus")
    names.update({"lingjun_partition_gpus", "lingjun_partition_cpus"})
    return names


def rules() -> list[dict]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def test_the_rules_pass_promtools_check_and_their_unit_tests():
    promtool = shutil.which("promtool")
    if promtool is None:        # the shape promtool checks first, read with PyYAML
        doc = yaml.safe_load(RULES.read_text())
        groups = [g["name"] for g in doc["groups"]]
        assert len(groups) == len(set(groups)), f"group names repeat: {groups}"
        for r in rules():
            assert set(r) <= {"alert", "expr", "for", "labels", "annotations"}, r
            assert re.fullmatch(r"(\d+[smhd])+", r.get("for", "0s")), r
        return
    check = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(rules())} rules found" in check.stdout
    unit = subprocess.run([promtool, "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent,
                          capture_output=True, text=True)
    assert unit.returncode == 0, unit.stdout + unit.stderr


def test_the_rules_alert_on_what_the_issue_asks_with_a_severity_and_a_summary():
    by_name = {r["alert"]: r for r in rules()}
    assert {"LingjunNodeDrainedByProbe", "LingjunGpusIdleWhilePending", "LingjunJobSilent"} <= set(by_name)
    for name, r in by_name.items():
        assert r["labels"]["severity"] in ("info", "warning", "critical"), name
        assert r["annotations"]["summary"], name
        assert r["expr"].strip(), name
    assert by_name["LingjunGpusIdleWhilePending"]["for"] == "15m"


def test_every_series_the_rules_name_is_one_the_collectors_export():
    exported = exported_names()
    named = {m for r in rules() for m in re.findall(r"\blingjun_\w+", r["expr"])}
    assert named, "no series named in the rules"
    assert named <= exported, f"the rules name series nobody exports: {sorted(named - exported)}"
