# shellcheck shell=bash
# A throw-away PostgreSQL cluster for the tests, shared by scripts/test and
# scripts/soak. Source it, then call `start_postgres`: unless
# BATON_TEST_DATABASE_URL is already set (then that server is used as is),
# it installs PostgreSQL if needed (as root, with apt-get), starts a cluster
# on a free port of 127.0.0.1, exports BATON_TEST_DATABASE_URL and stops and
# removes the cluster on exit (`trap stop_postgres EXIT`; a caller that sets
# its own EXIT trap afterwards calls stop_postgres from it).
#
# It also exports BATON_TEST_PG_BIN (the server's bin directory) and, when
# running as root, BATON_TEST_PG_USER (the user the server runs as): the
# queue suite's restart test starts a cluster of its own with them, so
# restarting it disturbs no other test. With BATON_TEST_DATABASE_URL given,
# they are exported only if a local install is found.
#
# Messages use the caller's `step` and `note` when it defines them.

declare -F step >/dev/null || step() { printf '\n==> %s\n' "$*" >&2; }
declare -F note >/dev/null || note() { printf '    %s\n' "$*" >&2; }

pg_dir=""
pg_bin=""
pg_as=()

stop_postgres() {
  [ -n "$pg_dir" ] || return 0
  # Quiet on purpose: nextest's summary stays the last thing printed.
  if [ -f "$pg_dir/data/postmaster.pid" ]; then
    "${pg_as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$pg_dir"
}

# The bin directory of the newest /usr/lib/postgresql/<major> install.
find_pg_bin() {
  local dir major best="" best_major=0
  for dir in /usr/lib/postgresql/*/bin; do
    [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] || continue
    major=${dir#/usr/lib/postgresql/}
    major=${major%%[!0-9]*}
    [ -n "$major" ] || continue
    if [ "$major" -gt "$best_major" ]; then
      best=$dir
      best_major=$major
    fi
  done
  printf '%s' "$best"
}

# A TCP port on 127.0.0.1 that nothing listens on (a hint: the start is
# retried with another one if somebody takes it first).
free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' && return
  fi
  local port
  for _ in $(seq 1 50); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      printf '%s\n' "$port"
      return
    fi
  done
  printf 'no free port found\n' >&2
  return 1
}

start_postgres() {
  if [ -n "${BATON_TEST_DATABASE_URL:-}" ]; then
    step "PostgreSQL: using BATON_TEST_DATABASE_URL from the environment"
    local bin
    bin=$(find_pg_bin)
    if [ -n "$bin" ] && { [ "$(id -u)" != 0 ] || id -u postgres >/dev/null 2>&1; }; then
      export BATON_TEST_PG_BIN=$bin
      [ "$(id -u)" != 0 ] || export BATON_TEST_PG_USER=postgres
    fi
    return
  fi
  local started=$SECONDS
  pg_bin=$(find_pg_bin)
  if [ -z "$pg_bin" ]; then
    if [ "$(id -u)" != 0 ]; then
      printf 'PostgreSQL is not installed: install Debian'\''s postgresql package or set BATON_TEST_DATABASE_URL\n' >&2
      exit 1
    fi
    step "installing postgresql (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    pg_bin=$(find_pg_bin)
    [ -n "$pg_bin" ] || { printf 'postgresql installed, but no initdb under /usr/lib/postgresql/*/bin\n' >&2; exit 1; }
  fi

  # PostgreSQL refuses to run as root: run it as `postgres` (the Debian
  # package creates it), or a dedicated system user if that is missing.
  local user
  user=$(id -un)
  if [ "$(id -u)" = 0 ]; then
    user=postgres
    if ! id -u "$user" >/dev/null 2>&1; then
      user=baton-pg
      id -u "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
    fi
    pg_as=(runuser -u "$user" --)
  fi

  pg_dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-pg.XXXXXX")
  trap stop_postgres EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  mkdir "$pg_dir/sock"
  [ "$(id -u)" != 0 ] || chown -R "$user" "$pg_dir"

  step "PostgreSQL: initdb in $pg_dir ($pg_bin, as $user)"
  "${pg_as[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -U baton --auth=trust --encoding=UTF8 --locale=C \
    --no-sync --no-instructions >"$pg_dir/initdb.log" 2>&1 || {
    cat "$pg_dir/initdb.log" >&2
    exit 1
  }

  local port attempt
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    # Throw-away cluster: durability off for speed.
    cat >>"$pg_dir/data/postgresql.conf" <<EOF

# scripts/${0##*/} (attempt $attempt)
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$pg_dir/sock'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
EOF
    if "${pg_as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 start >/dev/null 2>&1; then
      break
    fi
    if [ "$attempt" = 5 ]; then
      cat "$pg_dir/server.log" >&2
      printf 'PostgreSQL did not start\n' >&2
      exit 1
    fi
    note "start on port $port failed; trying another port"
  done

  "${pg_as[@]}" "$pg_bin/createdb" -h 127.0.0.1 -p "$port" -U baton baton_test
  export BATON_TEST_DATABASE_URL="postgres://baton@127.0.0.1:$port/baton_test"
  export BATON_TEST_PG_BIN=$pg_bin
  [ "$(id -u)" != 0 ] || export BATON_TEST_PG_USER=$user
  note "PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') ready in $((SECONDS - started)) s: BATON_TEST_DATABASE_URL=$BATON_TEST_DATABASE_URL"
}
