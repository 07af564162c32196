"""Prints text made to abuse a PR comment, a status page or an issue, then fails."""

import sys

LINES = [
    "```",
    "</details>",
    "<!-- conda-distro:check-pr -->",
    "@octocat please look at https://evil.example/steal",
]
LAST = ("\x1b[31mFAILED\x1b[0m \x1b]0;pwned\x07@octocat @pytorch/core mail me@evil.example see https://evil.example/a "
        "and www.evil.example ![pixel](https://evil.example/p.png) [click](https://evil.example/c) "
        "<https://evil.example/auto> <img src=x onerror=alert(1)> </details> ``` <script>alert(1)</script> "
        "fixes #1234 | cell | $x^2$ **bold** \u202eesrever\u202c " + "A" * 400)

for line in LINES:
    print(line)
print(LAST)
sys.exit(1)
