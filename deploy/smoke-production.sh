#!/usr/bin/env bash
# Production mode by hand, end to end, on this machine: a throwaway PostgreSQL 15 and
# Redis on free loopback ports, then the same commands docker-compose.yml runs
# (runcast db upgrade, runcast worker, runcast serve, runcast token create) with the
# same RUNCAST_* variables, hostnames replaced by 127.0.0.1. Checks /healthz, an ingest
# round trip through the Celery worker, idempotent redelivery, and the reference trainer.
#
#   deploy/smoke-production.sh            (run as root: PostgreSQL runs as user postgres)
#
# Needs the PostgreSQL 15 server binaries, redis-server and an installed .venv
# (scripts/install). Everything lives in one temporary directory, removed at the end.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNCAST="$ROOT/.venv/bin/runcast"
PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"

free_port() { "$ROOT/.venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
step() { printf '\n== %s\n' "$*"; }

W="$(mktemp -d /tmp/runcast-smoke.XXXXXX)"
chmod 755 "$W"
PGPORT="$(free_port)"; REDISPORT="$(free_port)"; APIPORT="$(free_port)"
PIDS=()

cleanup() {
  set +e
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  [[ -f "$W/redis.pid" ]] && kill "$(cat "$W/redis.pid")" 2>/dev/null
  [[ -d "$W/pg/data" ]] && runuser -u postgres -- "$PGBIN/pg_ctl" -D "$W/pg/data" -m fast -w stop >/dev/null
  rm -rf "$W"
}
trap cleanup EXIT

step "PostgreSQL 15 on 127.0.0.1:$PGPORT (password auth over TCP, as in the postgres image)"
install -d -o postgres -g postgres "$W/pg" "$W/sock"
head -c 18 /dev/urandom | base64 > "$W/pg/superuser-password"
chown postgres "$W/pg/superuser-password"
runuser -u postgres -- "$PGBIN/initdb" -D "$W/pg/data" -U postgres \
  --auth-local=trust --auth-host=scram-sha-256 --pwfile="$W/pg/superuser-password" >/dev/null
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$W/pg/data" -l "$W/pg/log" -w start \
  -o "-c listen_addresses=127.0.0.1 -c port=$PGPORT -c unix_socket_directories=$W/sock" >/dev/null
runuser -u postgres -- "$PGBIN/psql" -q -h "$W/sock" -p "$PGPORT" -U postgres \
  -c "CREATE ROLE runcast LOGIN PASSWORD 'runcast'" -c "CREATE DATABASE runcast OWNER runcast"
"$PGBIN/pg_isready" -h 127.0.0.1 -p "$PGPORT" -U runcast -d runcast

step "Redis on 127.0.0.1:$REDISPORT (no persistence, as in docker-compose.yml)"
redis-server --bind 127.0.0.1 --port "$REDISPORT" --daemonize yes --save '' --appendonly no \
  --dir "$W" --pidfile "$W/redis.pid" --logfile "$W/redis.log"
for _ in $(seq 50); do redis-cli -p "$REDISPORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
redis-cli -p "$REDISPORT" ping

# The environment docker-compose.yml gives migrate, api and worker.
export RUNCAST_DATABASE_URL="postgresql+psycopg://runcast:runcast@127.0.0.1:$PGPORT/runcast"
export RUNCAST_REDIS_URL="redis://127.0.0.1:$REDISPORT/0"
export RUNCAST_DATA_DIR="$W/data"

step "runcast serve refuses a database that is not migrated"
if timeout 30 "$RUNCAST" serve --host 127.0.0.1 --port "$APIPORT" >"$W/refused.log" 2>&1; then
  echo "FAIL: serve started on an empty database" >&2; exit 1
fi
grep -o 'SchemaOutOfDate: .*' "$W/refused.log"

step "runcast db upgrade (twice: the second run changes nothing)"
"$RUNCAST" db upgrade
"$RUNCAST" db upgrade

step "runcast worker, runcast serve --host 127.0.0.1 --port $APIPORT"
"$RUNCAST" worker --loglevel INFO >"$W/worker.log" 2>&1 &
PIDS+=($!)
"$RUNCAST" serve --host 127.0.0.1 --port "$APIPORT" >"$W/api.log" 2>&1 &
PIDS+=($!)
API="http://127.0.0.1:$APIPORT"
for _ in $(seq 100); do curl -fs "$API/healthz" >/dev/null 2>&1 && break; sleep 0.2; done
for _ in $(seq 100); do grep -q 'ready\.' "$W/worker.log" && break; sleep 0.2; done
curl -fsS "$API/healthz"; echo
grep -o 'celery@.* ready\.' "$W/worker.log"

step "runcast token create --project demo"
TOKEN="$("$RUNCAST" token create --project demo)"
echo "${TOKEN:0:10}... (${#TOKEN} characters)"

step "POST /api/v1/ingest: run_started, 3 metrics events (one NaN), finished"
NOW="$(date +%s)"
ev() { printf '{"v": 1, "run": "smoke-run-0001", "segment": "smoke-seg-0001", "ts": %s, %s}' "$NOW" "$1"; }
cat >"$W/batch.json" <<EOF
{"v": 1, "events": [
  $(ev '"type": "run_started", "seq": 0, "project": "demo", "name": "smoke", "config": {"lr": 0.001}'),
  $(ev '"type": "metrics", "seq": 1, "step": 1, "values": {"train/loss": 2.5, "lr": 0.001}'),
  $(ev '"type": "metrics", "seq": 2, "step": 2, "values": {"train/loss": 2.25, "lr": 0.001}'),
  $(ev '"type": "metrics", "seq": 3, "step": 3, "values": {"train/loss": "NaN", "lr": 0.001}'),
  $(ev '"type": "finished", "seq": 4, "step": 3, "status": "finished"')
]}
EOF
post() { curl -sS -o "$W/post.out" -w '%{http_code}' -X POST "$API/api/v1/ingest" \
  -H "Authorization: Bearer $1" -H 'Content-Type: application/json' --data-binary @"$W/batch.json"; }
code="$(post "$TOKEN")"; echo "HTTP $code $(cat "$W/post.out")"; [[ "$code" == 202 ]]
code="$(post rc_not-a-token)"; echo "HTTP $code $(cat "$W/post.out")"; [[ "$code" == 401 ]]

step "read it back (the worker stored it)"
for _ in $(seq 50); do
  curl -fs "$API/api/v1/runs/smoke-run-0001" 2>/dev/null | grep -q '"status":"finished"' && break; sleep 0.2
done
curl -fsS "$API/api/v1/runs?project=demo" | "$ROOT/.venv/bin/python" -c '
import json, sys
for r in json.load(sys.stdin)["runs"]:
    print(r["id"], r["status"], "last_step", r["last_step"], "last_values", r["last_values"])'
curl -fsS "$API/api/v1/runs/smoke-run-0001/metrics?key=train/loss"; echo
grep -o 'runcast.ingest_batch\[.*\] succeeded in [0-9.]*s: .*' "$W/worker.log" | sed 's/\[[^]]*\]//'

step "the same batch again: accepted, stores nothing new"
code="$(post "$TOKEN")"; echo "HTTP $code $(cat "$W/post.out")"; [[ "$code" == 202 ]]
for _ in $(seq 50); do [[ "$(grep -c 'succeeded' "$W/worker.log")" -ge 2 ]] && break; sleep 0.2; done
grep -o 'runcast.ingest_batch\[.*\] succeeded in [0-9.]*s: .*' "$W/worker.log" | sed 's/\[[^]]*\]//' | tail -1

step "runcast train: the reference trainer broadcasting 20 steps"
RUNCAST_SPOOL_DIR="$W/spool" "$RUNCAST" train --server "$API" --token "$TOKEN" --project demo \
  --max-steps 20 --eval-interval 10 --ckpt-interval 10 --data-limit 50 --out-dir "$W/checkpoints" 2>&1 | tail -4
sleep 1
curl -fsS "$API/api/v1/runs?project=demo" | "$ROOT/.venv/bin/python" -c '
import json, sys
for r in json.load(sys.stdin)["runs"]:
    print(r["id"], r["name"], r["status"], "last_step", r["last_step"], "keys", len(r["last_values"]))'

step "OK"
