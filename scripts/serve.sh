#!/usr/bin/env bash
# Serve a class or a talk from one machine: N Streamlit app processes on local ports behind
# nginx, sticky per browser, one GPU job at a time across all of them.
#
#   bash scripts/serve.sh                    # one app process per core (at most 16), port 8501
#   bash scripts/serve.sh --replicas 8 --port 80
#
# Options: --replicas N (default: $FA_LAB_REPLICAS, else the number of cores, at most 16;
# 1 runs Streamlit alone, without nginx), --port P (default 8501; replicas listen on 127.0.0.1:P+101...),
# --python PATH (an interpreter that already has the app's packages; default: .venv, made
# by scripts/start.sh's setup on first use), --run-dir DIR (logs, nginx's config and pid;
# default /tmp/fa-lab-serve-P).
#
# Stickiness: a Streamlit session lives in the memory of one process, so every request of a
# browser must reach the same process. nginx gives each new browser a cookie (fa_lab_replica,
# a random key) and hashes it onto the replicas (`hash ... consistent`), so a whole class
# behind one NAT address still spreads over all of them (ip_hash would send it to one).
# /_stcore/stream is proxied as a websocket. Health: nginx takes a replica that fails out of
# the hash for 10 s (max_fails), and this script polls every replica's /_stcore/health every
# 5 s and restarts one that died or failed 3 polls in a row. GET /healthz answers "ok" while
# nginx and at least one replica are up.
#
# The GPU: every replica takes engine.gpu.lock's file lock (FA_LAB_GPU_LOCK) around each GPU
# job, so timings stay honest; a run that waits says so on its page. Each replica uses one
# BLAS thread: the replicas already fill the cores.
set -euo pipefail
cd "$(dirname "$0")/.."

cores=$(nproc 2>/dev/null || echo 2)
replicas="${FA_LAB_REPLICAS:-$(( cores < 16 ? cores : 16 ))}"
port=8501
python=""
run_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --replicas) replicas="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --run-dir) run_dir="$2"; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "serve.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$replicas" in ''|*[!0-9]*|0) echo "serve.sh: --replicas must be a whole number ≥ 1" >&2; exit 2 ;; esac
run_dir="${run_dir:-${TMPDIR:-/tmp}/fa-lab-serve-$port}"
mkdir -p "$run_dir"

if [ -z "$python" ]; then
  FA_LAB_SETUP_ONLY=1 bash scripts/start.sh
  python=.venv/bin/python
fi

nginx_bin=$(command -v nginx || true)
[ -n "$nginx_bin" ] || { [ -x /usr/sbin/nginx ] && nginx_bin=/usr/sbin/nginx; }
if [ "$replicas" -gt 1 ] && [ -z "$nginx_bin" ]; then
  cat >&2 <<EOF
serve.sh: nginx is not installed, and $replicas app processes need it in front of them.
  Debian/Ubuntu:  sudo apt-get install -y nginx
  Fedora/RHEL:    sudo dnf install -y nginx
serve.sh starts its own nginx with its own config (the system's nginx service need not run).
Or serve one process without nginx:  bash scripts/serve.sh --replicas 1
EOF
  exit 1
fi

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
export FA_LAB_GPU_LOCK="${FA_LAB_GPU_LOCK:-${TMPDIR:-/tmp}/fa_lab_gpu.lock}"
export PYTHONUNBUFFERED=1
# One cookie secret for every replica, so a cookie one of them signs is good at all of them.
STREAMLIT_SERVER_COOKIE_SECRET="${STREAMLIT_SERVER_COOKIE_SECRET:-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')}"
export STREAMLIT_SERVER_COOKIE_SECRET

if [ "$replicas" -eq 1 ]; then
  echo "serve.sh: one app process on port $port (no proxy)"
  exec "$python" -m streamlit run app/main.py --server.headless true --server.port "$port" \
    --server.address 0.0.0.0 --browser.gatherUsageStats false
fi

replica_port() { echo $(( port + 100 + $1 )); }
pids=()
nginx_pid=""

start_replica() {      # start_replica I: app process I on its local port, its log in run_dir
  "$python" -m streamlit run app/main.py --server.headless true \
    --server.port "$(replica_port "$1")" --server.address 127.0.0.1 \
    --browser.gatherUsageStats false >>"$run_dir/replica-$1.log" 2>&1 &
  pids[$1]=$!
}

healthy() {            # healthy I: replica I answers its health check (bash's /dev/tcp: no
  local reply         # interpreter started per poll)
  { exec 3<>"/dev/tcp/127.0.0.1/$(replica_port "$1")"; } 2>/dev/null || return 1
  printf 'GET /_stcore/health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  reply=$(timeout 3 cat <&3 2>/dev/null || true)
  exec 3<&- 3>&-
  [[ "$reply" == *$'\r\n\r\nok' ]]
}

stop_all() {
  trap - EXIT INT TERM
  [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop_all EXIT
trap 'exit 0' INT TERM

servers=""
for i in $(seq 1 "$replicas"); do
  start_replica "$i"
  servers+="    server 127.0.0.1:$(replica_port "$i") max_fails=2 fail_timeout=10s;"$'\n'
done

cat >"$run_dir/nginx.conf" <<EOF
# Written by scripts/serve.sh: $replicas FlashAttention Lab processes behind one port.
daemon off;
worker_processes auto;
pid $run_dir/nginx.pid;
error_log $run_dir/nginx-error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path $run_dir/client_body;
  proxy_temp_path $run_dir/proxy;
  fastcgi_temp_path $run_dir/fastcgi;
  uwsgi_temp_path $run_dir/uwsgi;
  scgi_temp_path $run_dir/scgi;
  client_max_body_size 70m;          # uploads: the app's own cap is 64 MB

  # A browser's replica key: its cookie, or on its first request a new random one, which
  # the response sets as the cookie so every later request hashes the same way.
  map \$cookie_fa_lab_replica \$fa_lab_key {
    ""      \$request_id;
    default \$cookie_fa_lab_replica;
  }
  map \$cookie_fa_lab_replica \$fa_lab_set_cookie {
    ""      "fa_lab_replica=\$request_id; Path=/; Max-Age=86400; HttpOnly; SameSite=Lax";
    default "";
  }
  map \$http_upgrade \$connection_upgrade {
    default upgrade;
    ""      close;
  }

  upstream fa_lab {
    hash \$fa_lab_key consistent;
$servers  }

  server {
    listen $port;
    proxy_http_version 1.1;
    proxy_set_header Host \$host;
    proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    proxy_set_header X-Forwarded-Proto \$scheme;
    add_header Set-Cookie \$fa_lab_set_cookie;

    location = /healthz {
      proxy_pass http://fa_lab/_stcore/health;
      proxy_next_upstream error timeout http_502 http_503;
    }
    location /_stcore/stream {
      proxy_pass http://fa_lab;
      proxy_set_header Upgrade \$http_upgrade;
      proxy_set_header Connection \$connection_upgrade;
      proxy_read_timeout 1d;
      proxy_send_timeout 1d;
      proxy_buffering off;
    }
    location / {
      proxy_pass http://fa_lab;
      proxy_next_upstream error timeout http_502 http_503;
    }
  }
}
EOF

for i in $(seq 1 "$replicas"); do
  for _ in $(seq 1 120); do
    healthy "$i" && break
    kill -0 "${pids[$i]}" 2>/dev/null || { echo "serve.sh: replica $i exited; see $run_dir/replica-$i.log" >&2; exit 1; }
    sleep 0.5
  done
done
"$nginx_bin" -e "$run_dir/nginx-error.log" -p "$run_dir" -c "$run_dir/nginx.conf" &
nginx_pid=$!
echo "serve.sh: $replicas app processes behind nginx on port $port (logs and config: $run_dir)"

declare -A failures
while true; do
  sleep 5
  kill -0 "$nginx_pid" 2>/dev/null || { echo "serve.sh: nginx exited; see $run_dir/nginx-error.log" >&2; exit 1; }
  for i in $(seq 1 "$replicas"); do
    if kill -0 "${pids[$i]}" 2>/dev/null && healthy "$i"; then
      failures[$i]=0
      continue
    fi
    failures[$i]=$(( ${failures[$i]:-0} + 1 ))
    if ! kill -0 "${pids[$i]}" 2>/dev/null || [ "${failures[$i]}" -ge 3 ]; then
      echo "serve.sh: replica $i on port $(replica_port "$i") is down; restarting it" >&2
      kill "${pids[$i]}" 2>/dev/null || true
      wait "${pids[$i]}" 2>/dev/null || true
      start_replica "$i"
      failures[$i]=0
    fi
  done
done
