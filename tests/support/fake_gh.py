"""A stand-in for the GitHub CLI (`gh`) in workflow tests (tests/test_workflows.py), backed by a JSON file.

Run as ``python fake_gh.py ARGS...`` with ``FAKE_GH_STATE`` naming the state file:
``{"pulls": {"7": {"head": SHA}}, "comments": {"7": [{"id", "user": {"login"}, "body"}]}, "calls": [...],
"next_id": N}``. It answers what the workflows call, nothing more:

* ``api repos/O/R/pulls/N [--jq EXPR]`` — the pull request (its ``head.sha``);
* ``api [--paginate] repos/O/R/issues/N/comments [--jq EXPR]`` — its comments;
* ``api --method POST repos/O/R/issues/N/comments -F body=@FILE`` — a new comment by github-actions[bot];
* ``api --method PATCH repos/O/R/issues/comments/ID -F body=@FILE`` — edit one;
* ``pr create … --head B --title T --body-file F`` — prints the new PR's URL;
* ``issue create … --title T --body-file F`` — prints the new issue's URL (the issue is ``open``);
* ``issue list --label L --state open|closed|all --json number,title[,state] [--jq EXPR]`` — the issues
  created here with that label;
* ``issue comment N --body-file F`` and ``issue close N [--comment C]`` — on an issue created here;
* ``label create NAME …`` — records the label;
* ``pr view URL --json labels [--jq EXPR]`` — the labels of a PR it opened (``pr create --label L``);
* ``pr merge URL --auto --merge`` — records that auto-merge is on for it (``auto_merge``).

``--jq`` is applied with the real ``jq -r`` (gh prints strings raw). Every call is recorded in ``calls``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

BOT = "github-actions[bot]"


def _opt(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def _jq(data, expr: str | None) -> str:
    text = json.dumps(data)
    if expr is None:
        return text + "\n"
    return subprocess.run(["jq", "-r", expr], input=text, capture_output=True, text=True, check=True,
                          timeout=60).stdout


def main(argv: list[str]) -> int:
    path = Path(os.environ["FAKE_GH_STATE"])
    state = json.loads(path.read_text())
    state.setdefault("calls", []).append(argv)
    out = ""
    try:
        if argv[:1] == ["api"]:
            method = _opt(argv, "--method") or "GET"
            field = _opt(argv, "-F")
            endpoint = next(a for a in argv[1:] if a.startswith("repos/"))
            body = Path(field.split("=@", 1)[1]).read_text() if field and "=@" in field else None
            if m := re.fullmatch(r"repos/[^/]+/[^/]+/pulls/(\d+)", endpoint):
                out = _jq({"number": int(m[1]), "head": {"sha": state["pulls"][m[1]]["head"]}}, _opt(argv, "--jq"))
            elif m := re.fullmatch(r"repos/[^/]+/[^/]+/issues/(\d+)/comments", endpoint):
                comments = state.setdefault("comments", {}).setdefault(m[1], [])
                if method == "POST":
                    state["next_id"] = state.get("next_id", 100) + 1
                    comments.append({"id": state["next_id"], "user": {"login": BOT}, "body": body})
                    out = json.dumps(comments[-1]) + "\n"
                else:
                    out = _jq(comments, _opt(argv, "--jq"))
            elif (m := re.fullmatch(r"repos/[^/]+/[^/]+/issues/comments/(\d+)", endpoint)) and method == "PATCH":
                found = [c for cs in state.get("comments", {}).values() for c in cs if c["id"] == int(m[1])]
                if not found:
                    sys.stderr.write("HTTP 404\n")
                    return 1
                found[0]["body"] = body
                out = json.dumps(found[0]) + "\n"
            else:
                sys.stderr.write(f"fake gh: unexpected api call {argv}\n")
                return 2
        elif argv[:2] in (["pr", "create"], ["issue", "create"]):
            kind = argv[0]
            item = {"head": _opt(argv, "--head"), "base": _opt(argv, "--base"), "title": _opt(argv, "--title"),
                    "body": Path(_opt(argv, "--body-file")).read_text()}
            if "--label" in argv:
                item["labels"] = [argv[i + 1] for i, a in enumerate(argv) if a == "--label"]
            items = state.setdefault(f"{kind}s", [])
            if kind == "issue":
                item["state"] = "open"
            items.append(item)
            out = f"https://github.com/owner/repo/{'pull' if kind == 'pr' else 'issues'}/{len(items)}\n"
        elif argv[:2] == ["issue", "list"]:
            want, label = _opt(argv, "--state") or "open", _opt(argv, "--label")
            fields = (_opt(argv, "--json") or "number,title").split(",")
            found = [{"number": i, "title": it["title"], "state": it["state"]}
                     for i, it in enumerate(state.get("issues", []), 1)
                     if (label is None or label in it.get("labels", [])) and want in ("all", it["state"])]
            out = _jq([{k: v for k, v in it.items() if k in fields} for it in found], _opt(argv, "--jq"))
        elif argv[:2] in (["issue", "comment"], ["issue", "close"]):
            issues = state.get("issues", [])
            if not argv[2].isdigit() or not 0 < int(argv[2]) <= len(issues):
                sys.stderr.write(f"GraphQL: Could not resolve to an issue with the number of {argv[2]}.\n")
                return 1
            issue = issues[int(argv[2]) - 1]
            text = Path(_opt(argv, "--body-file")).read_text() if "--body-file" in argv else _opt(argv, "--comment")
            if text is not None:
                issue.setdefault("comments", []).append(text)
            if argv[1] == "close":
                issue["state"] = "closed"
        elif argv[:2] == ["label", "create"]:
            state.setdefault("labels", []).append(argv[2])
        elif argv[:2] in (["pr", "view"], ["pr", "merge"]):
            m = re.fullmatch(r"https://github\.com/owner/repo/pull/(\d+)", argv[2])
            prs = state.get("prs", [])
            if m is None or not 0 < int(m[1]) <= len(prs):
                sys.stderr.write(f"GraphQL: Could not resolve to a PullRequest ({argv[2]})\n")
                return 1
            pr = prs[int(m[1]) - 1]
            if argv[1] == "view":
                out = _jq({"labels": [{"name": n} for n in pr.get("labels", [])]}, _opt(argv, "--jq"))
            else:
                pr["auto_merge"] = "--auto" in argv
        else:
            sys.stderr.write(f"fake gh: unexpected call {argv}\n")
            return 2
    finally:
        path.write_text(json.dumps(state, indent=1))
    sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
