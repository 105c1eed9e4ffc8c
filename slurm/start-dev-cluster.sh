#!/usr/bin/env bash
# Start a real single-node Slurm on localhost, as root, without systemd:
# munged, a private MariaDB, slurmdbd (so that sacct works), slurmctld and
# slurmd. Idempotent: a daemon whose PID file names a live process is left
# alone. Installs the Debian packages it needs if they are missing.
#
#   bash slurm/start-dev-cluster.sh      # then sbatch, squeue, sacct work
#   bash slurm/stop-dev-cluster.sh
set -euo pipefail
source "$(dirname "$0")/common.sh"
trap 'echo "dev cluster: failed at line $LINENO of $0; see $STATE/log/" >&2' ERR

if [ "$(id -u)" != 0 ]; then
    echo "dev cluster: must run as root (it starts munged, slurmctld and slurmd)" >&2
    exit 2
fi

export DEBIAN_FRONTEND=noninteractive
missing=()
for p in slurm-wlm munge slurmdbd mariadb-server; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    # PID 1 is not systemd, and policy-rc.d stops the packages from starting
    # their services: we start every daemon ourselves below.
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi

host=$(hostname -s)
mkdir -p "$STATE"/{run,log,ctld,slurmd,mysql-run}
chmod 711 "$STATE"   # mysql must reach its datadir; the password file is 0600

# /etc/slurm/slurm.conf is where sbatch, squeue and sacct look. Never
# overwrite a configuration that this script did not write.
conf=/etc/slurm/slurm.conf
if [ -e "$conf" ] && ! head -1 "$conf" | grep -q "^$MARKER"; then
    echo "dev cluster: $conf exists and was not written by proofbatch; refusing to replace it" >&2
    exit 2
fi
[ -s "$STATE/db-pass" ] || (umask 077; head -c 18 /dev/urandom | base64 | tr -dc A-Za-z0-9 >"$STATE/db-pass")
mem_mb=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
render() {
    sed -e "s|@HOST@|$host|g" -e "s|@STATE@|$STATE|g" -e "s|@CPUS@|${PROOFBATCH_SLURM_CPUS:-8}|g" \
        -e "s|@MEM_MB@|$mem_mb|g" -e "s|@DB_PORT@|$DB_PORT|g" -e "s|@DBD_PORT@|$DBD_PORT|g" \
        -e "s|@MAX_ARRAY@|${PROOFBATCH_SLURM_MAX_ARRAY:-1001}|g" -e "s|@DB_PASS@|$(cat "$STATE/db-pass")|g" "$1"
}
mkdir -p /etc/slurm
render "$HERE/slurm.conf.in" >"$conf.new" && mv "$conf.new" "$conf"
(umask 077; render "$HERE/slurmdbd.conf.in" >/etc/slurm/slurmdbd.conf.new)
mv /etc/slurm/slurmdbd.conf.new /etc/slurm/slurmdbd.conf   # slurmdbd wants it 0600

# munge: its postinst already wrote /etc/munge/munge.key. No sudo here.
install -d -o munge -g munge -m 0755 /run/munge
if [ -z "$(pid_of /run/munge/munged.pid)" ]; then
    [ -s /etc/munge/munge.key ] || runuser -u munge -- /usr/sbin/mungekey
    runuser -u munge -- /usr/sbin/munged
fi
wait_for 10 munged bash -c 'munge -n | unmunge'

# A private MariaDB on 127.0.0.1:$DB_PORT for slurmdbd.
db=$STATE/mysql
if [ ! -d "$db/mysql" ]; then
    rm -rf "$db"   # a half-done earlier install
    mariadb-install-db --user=mysql --datadir="$db" --auth-root-authentication-method=socket >"$STATE/log/mariadb-install.log" 2>&1
fi
chown -R mysql:mysql "$db" "$STATE/mysql-run"
# mariadbd does not daemonize, unlike the Slurm daemons: setsid takes it out
# of the caller's session and process group, so that a caller whose group is
# killed when it ends (a test harness's job, a CI step) leaves it running. It
# writes its log as mysql, which cannot create files in the log folder.
touch "$STATE/log/mariadb.log"
chown mysql:mysql "$STATE/log/mariadb.log"
if [ -z "$(pid_of "$STATE/mysql-run/mariadbd.pid")" ]; then
    setsid /usr/sbin/mariadbd --user=mysql --datadir="$db" --bind-address=127.0.0.1 --port="$DB_PORT" \
        --socket="$STATE/mysql-run/mysqld.sock" --pid-file="$STATE/mysql-run/mariadbd.pid" \
        --log-error="$STATE/log/mariadb.log" --skip-name-resolve --innodb-buffer-pool-size=64M \
        </dev/null >/dev/null 2>&1 &
fi
wait_for 60 mariadbd mariadb --socket="$STATE/mysql-run/mysqld.sock" -u root -e 'select 1'
pass=$(cat "$STATE/db-pass")
mariadb --socket="$STATE/mysql-run/mysqld.sock" -u root <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
SQL

if [ -z "$(pid_of "$STATE/run/slurmdbd.pid")" ]; then
    /usr/sbin/slurmdbd
fi
wait_for 30 slurmdbd sacctmgr -n list cluster
sacctmgr -n list cluster format=cluster | grep -qw proofbatch || sacctmgr -i add cluster proofbatch >/dev/null

if [ -z "$(pid_of "$STATE/run/slurmctld.pid")" ]; then
    /usr/sbin/slurmctld
fi
wait_for 30 slurmctld scontrol ping
if [ -z "$(pid_of "$STATE/run/slurmd.pid")" ]; then
    /usr/sbin/slurmd
fi
node_up() { sinfo -h -N -o %t | grep -qE '^(idle|mix|alloc)'; }
if ! wait_for 30 "node $host" node_up; then
    scontrol update nodename="$host" state=resume || true
    wait_for 15 "node $host" node_up
fi
echo "dev cluster up: $(sinfo -h -o '%P %D nodes %t %c cpus') (state in $STATE)"
