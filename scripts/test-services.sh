#!/usr/bin/env bash
# Make sure PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) answer before the suite runs.
# Starts them with the machine's own service commands when they are installed but stopped;
# otherwise says exactly what is missing and how to start it.
set -u

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null || python3 - <<'PY'
import socket, sys
s = socket.socket(); s.settimeout(1)
sys.exit(0 if s.connect_ex(("127.0.0.1", 5432)) == 0 else 1)
PY
}
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG || python3 - <<'PY'
import socket, sys
s = socket.socket(); s.settimeout(1)
try:
    s.connect(("127.0.0.1", 6379)); s.sendall(b"PING\r\n"); sys.exit(0 if s.recv(16).startswith(b"+PONG") else 1)
except OSError:
    sys.exit(1)
PY
}

wait_for() { for _ in $(seq 1 30); do "$1" && return 0; sleep 0.5; done; return 1; }

status=0
if ! pg_up; then
  if command -v pg_ctlcluster >/dev/null && ls /etc/postgresql >/dev/null 2>&1; then
    echo "PostgreSQL is not answering on 127.0.0.1:5432; starting it with pg_ctlcluster"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
    wait_for pg_up || true
  fi
  if ! pg_up; then
    echo "ERROR: PostgreSQL is not answering on 127.0.0.1:5432." >&2
    echo "  Start one with trust auth for user postgres, e.g.:" >&2
    echo "    docker run -d -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust postgres:15" >&2
    echo "  or set TEST_DATABASE_URL=postgres://USER:PASS@HOST:PORT/console" >&2
    status=1
  fi
fi
if ! redis_up; then
  if command -v redis-server >/dev/null; then
    echo "Redis is not answering on 127.0.0.1:6379; starting it"
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
    wait_for redis_up || true
  fi
  if ! redis_up; then
    echo "ERROR: Redis is not answering on 127.0.0.1:6379." >&2
    echo "  Start one, e.g.: redis-server --port 6379 --daemonize yes   (or docker run -d -p 6379:6379 redis:7)" >&2
    status=1
  fi
fi
[ $status -eq 0 ] && echo "PostgreSQL and Redis are up."
exit $status
