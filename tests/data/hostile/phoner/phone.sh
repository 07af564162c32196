# Reach the upstream channel's server from recipe code (placeholders are filled in by the test).
phase="$1"
if (exec 3<>/dev/tcp/127.0.0.1/@PORT@ && printf 'GET /phoner-%s-tcp HTTP/1.0\r\n\r\n' "$phase" >&3 && head -c 12 <&3) 2>/dev/null; then
  echo "PHONE-$phase-TCP-REACHED"
else
  echo "PHONE-$phase-TCP-BLOCKED"
fi
/usr/bin/python3 - "$phase" <<'PY'
import sys, urllib.request
phase = sys.argv[1]
try:
    urllib.request.urlopen(f"@URL@/phoner-{phase}-http", timeout=5).read()
    print(f"PHONE-{phase}-HTTP-REACHED")
except urllib.error.HTTPError:
    print(f"PHONE-{phase}-HTTP-REACHED")  # (the server answered: 404)
except OSError as exc:
    print(f"PHONE-{phase}-HTTP-BLOCKED {exc.__class__.__name__}")
PY
exit 0
