"""`vapipe doctor` as a user runs it: on a machine without a GPU it warns but exits 0, and its JSON
lists the same checks as its text."""
import json
import re
import subprocess
import unittest

from e2e.common import VAPIPE, join_cgroup, pids_cgroup

LINE = re.compile(r"^(OK|WARN|FAIL) +(\S+) +(.+)$")


def doctor(*args):
    return subprocess.run([VAPIPE, "doctor", *args], capture_output=True, text=True, timeout=120)


class DoctorTest(unittest.TestCase):
    def test_text_report_exits_0_and_has_one_line_per_check(self):
        p = doctor()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        lines = p.stdout.strip().splitlines()
        checks = [LINE.match(line) for line in lines[:-1]]
        self.assertTrue(all(checks), lines)
        self.assertNotIn("FAIL", [c.group(1) for c in checks])
        for c in checks:
            self.assertEqual("; fix: " in c.group(3), c.group(1) != "OK", c.group(0))
        counts = {s: sum(c.group(1) == s for c in checks) for s in ("OK", "WARN", "FAIL")}
        self.assertEqual(lines[-1], f"{len(checks)} checks: {counts['OK']} OK, {counts['WARN']} WARN, "
                                    f"{counts['FAIL']} FAIL")

    def test_json_lists_the_same_checks(self):
        text = [LINE.match(line).group(2) for line in doctor().stdout.strip().splitlines()[:-1]]
        p = doctor("--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        report = json.loads(p.stdout)
        self.assertTrue(report["ok"])
        self.assertEqual([c["name"] for c in report["checks"]], text)
        for c in report["checks"]:
            self.assertEqual(set(c), {"name", "status", "detail", "fix"})

    def test_a_pids_limit_of_its_cgroup_is_the_threads_check(self):
        """In a pids cgroup of its own (made here: root, a writable pids controller, v1 or v2), doctor
        reads that cgroup's limit, names its file, and warns when it is too low for 64 cameras."""
        group = pids_cgroup(self, 500)
        p = subprocess.run([VAPIPE, "doctor"], capture_output=True, text=True, timeout=120,
                           preexec_fn=lambda: join_cgroup(group))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        line = next((l for l in p.stdout.splitlines() if LINE.match(l) and LINE.match(l).group(2) == "threads"), "")
        self.assertTrue(line.startswith("WARN"), p.stdout)
        self.assertIn(f"cgroup pids.max ({group}/pids.max): 500", line)
        self.assertIn("--pids-limit", line)

    def test_unknown_argument_is_a_usage_error(self):
        p = doctor("--nope")
        self.assertEqual(p.returncode, 1)
        self.assertIn("usage: vapipe doctor [--json]", p.stderr)


if __name__ == "__main__":
    unittest.main()
