# Shared by start-dev-cluster.sh and stop-dev-cluster.sh (sourced, not run).
STATE=${PROOFBATCH_SLURM_STATE:-/var/lib/proofbatch-slurm}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MARKER="# proofbatch dev cluster"
DB_PORT=${PROOFBATCH_SLURM_DB_PORT:-3307}
DBD_PORT=${PROOFBATCH_SLURM_DBD_PORT:-6819}

# PID 1 here reaps zombies late, so kill -0 sees a <defunct> process as alive:
# read its state from /proc instead.
alive() {
    local pid=$1 state
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
    state=$(sed 's/^.*) //' "/proc/$pid/stat" | cut -d' ' -f1)
    [ "$state" != Z ] && [ "$state" != X ]
}

pid_of() {   # the live PID recorded in a pid file, or nothing
    local pid
    [ -r "$1" ] || return 0
    pid=$(tr -dc 0-9 <"$1")
    alive "$pid" && echo "$pid"
    return 0
}

wait_for() {   # wait_for SECONDS DESCRIPTION COMMAND...
    local secs=$1 what=$2
    shift 2
    for _ in $(seq $((secs * 5))); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "dev cluster: $what did not come up within $secs s; see $STATE/log/" >&2
    return 1
}
