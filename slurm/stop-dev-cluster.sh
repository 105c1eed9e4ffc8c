#!/usr/bin/env bash
# Stop the dev cluster started by start-dev-cluster.sh: cancel jobs while the
# controller is up, then stop slurmd, slurmctld, slurmdbd, mariadbd and
# munged, in that order, each by the PID in its pid file (never by name).
set -uo pipefail
source "$(dirname "$0")/common.sh"

if [ -n "$(pid_of "$STATE/run/slurmctld.pid")" ]; then
    scancel --full --quiet --state=RUNNING --user=root 2>/dev/null
    scancel --quiet --user=root 2>/dev/null
    for _ in $(seq 50); do
        [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
        sleep 0.2
    done
fi

stop() {   # stop NAME PIDFILE
    local pid
    pid=$(pid_of "$2")
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 100); do
        alive "$pid" || return 0
        sleep 0.1
    done
    echo "dev cluster: $1 (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null
}
stop slurmd "$STATE/run/slurmd.pid"
stop slurmctld "$STATE/run/slurmctld.pid"
stop slurmdbd "$STATE/run/slurmdbd.pid"
stop mariadbd "$STATE/mysql-run/mariadbd.pid"
stop munged /run/munge/munged.pid
echo "dev cluster stopped"
