#!/usr/bin/env bash
# A real Slurm 22.05 cluster on this one machine, for the Slurm backend's tests and for development:
# munge, slurmdbd (accounting in MariaDB), slurmctld, 4 slurmd virtual nodes gpu-[01-04] x 8 fake A100
# GPUs (GRES gpu:a100:8) and slurmrestd with JWT auth. Debian 12 packages, no systemd; every daemon is
# started here and stopped by the PID in its pid file.
#
#   scripts/slurm-local.sh start    install what is missing, write the config, start what is not running
#                                   (a daemon that runs is left alone), wait until all answer, print the env
#   scripts/slurm-local.sh stop     stop every daemon this script started, by PID
#   scripts/slurm-local.sh status   what runs; exit 0 only when the whole cluster answers
#   scripts/slurm-local.sh env      the environment a client needs (SLURM_CONF, SLURM_RESTD_URL)
#
# State lives in $GPUC_SLURM_DIR (default /tmp/gpuc-slurm; short, as unix socket paths are limited).
# Ports: slurmctld 6817, slurmdbd 6819, slurmrestd 6820, the four slurmd 8711-8714. Accounting uses a
# MariaDB that answers on 127.0.0.1:3306 as root without a password when there is one (database
# slurm_acct_db, user slurm); otherwise a private mariadbd on 127.0.0.1:8715 inside the state dir.
set -euo pipefail

S=${GPUC_SLURM_DIR:-/tmp/gpuc-slurm}
CLUSTER=gpuc
NODES=(gpu-01 gpu-02 gpu-03 gpu-04)
NODE_PORT0=8711
RESTD_PORT=6820
DB_PORT_SHARED=${GPUC_SLURM_SHARED_DB_PORT:-3306}  # a MariaDB that may already run here
DB_PORT_PRIVATE=8715
DB_PASS=gpuc-slurm-db
export SLURM_CONF=$S/etc/slurm.conf

log() { printf 'slurm-local: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --- packages ------------------------------------------------------------------------------------------

# libslurm-dev: spank.h, for the SPANK plugin a test builds (tests/slurm_spank/pyxis_stub.c, with the machine's gcc).
PACKAGES=(munge slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin slurmdbd mariadb-client libslurm-dev)

missing_packages() {
  local pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || printf '%s\n' "$pkg"
  done
}

apt_install() {
  local apt=(apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends)
  [ "$(id -u)" -eq 0 ] || die "installing $* needs root (apt-get)"
  log "installing $*"
  if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" "$@" >"$S/log/apt.log" 2>&1; then
    apt-get -o DPkg::Lock::Timeout=300 update >>"$S/log/apt.log" 2>&1
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" "$@" >>"$S/log/apt.log" 2>&1 || die "apt-get install failed, see $S/log/apt.log"
  fi
}

install_packages() {
  local missing
  mapfile -t missing < <(missing_packages "${PACKAGES[@]}")
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  id slurmrest >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin slurmrest  # slurmrestd refuses root
}

# --- config --------------------------------------------------------------------------------------------

db_port() { cat "$S/run/db.port" 2>/dev/null || echo "$DB_PORT_SHARED"; }

write_config() {
  mkdir -p "$S"/{etc,log,run,state,spool,dev,jobs,keys} "$S/etc/plugstack.conf.d"
  chmod 755 "$S" "$S/run"  # munged wants every directory above its socket searchable
  chmod 700 "$S/keys"
  [ -s "$S/keys/munge.key" ] || { dd if=/dev/urandom of="$S/keys/munge.key" bs=1024 count=1 status=none; chmod 400 "$S/keys/munge.key"; }
  [ -s "$S/keys/jwt_hs256.key" ] || { dd if=/dev/urandom of="$S/keys/jwt_hs256.key" bs=32 count=1 status=none; }
  chmod 600 "$S/keys/jwt_hs256.key"
  # Fake GPUs must be character devices (slurmd ignores regular files): /dev/null's numbers.
  local i
  for i in 0 1 2 3 4 5 6 7; do [ -c "$S/dev/nvidia$i" ] || mknod "$S/dev/nvidia$i" c 1 3; done
  chmod 1777 "$S/jobs"  # job output of any user

  local last=$((NODE_PORT0 + ${#NODES[@]} - 1))
  cat >"$S/etc/slurm.conf" <<EOF
# Written by scripts/slurm-local.sh; rewritten on every start.
ClusterName=$CLUSTER
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$S/run/munge.socket
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$S/keys/jwt_hs256.key
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool/%n
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
GresTypes=gpu
MailProg=/bin/true
EnforcePartLimits=ALL
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,bf_interval=1,sched_min_interval=100000
PriorityType=priority/multifactor
PriorityWeightQOS=10000
PreemptType=preempt/qos
PreemptMode=REQUEUE
MpiDefault=none
SwitchType=switch/none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=600
KillWait=5
# Clients give up on an unreachable controller after about this long (default 10 s): tests stop it on purpose.
MessageTimeout=4
Waittime=0
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
# slurmctld's connection to slurmdbd ignores AuthInfo; this is where it finds the munge socket.
AccountingStoragePass=$S/run/munge.socket
AccountingStorageTRES=gres/gpu,gres/gpu:a100
AccountingStorageEnforce=associations,limits,qos
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
NodeName=gpu-[01-04] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[$NODE_PORT0-$last] CPUs=8 Boards=1 SocketsPerBoard=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=64000 Gres=gpu:a100:8 State=UNKNOWN
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
# SPANK plugins: none by default. A test that needs one (tests/backends/slurm/test_pyxis.py) puts a file into
# plugstack.conf.d for its own duration: srun, sbatch and each job step's slurmstepd read the stack when they start.
PlugStackConfig=$S/etc/plugstack.conf
EOF
  echo "include $S/etc/plugstack.conf.d/*.conf" >"$S/etc/plugstack.conf"
  rm -f "$S"/etc/plugstack.conf.d/*.conf  # what an interrupted test left loaded is not any more
  cat >"$S/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=gpu-[01-04] Name=gpu Type=a100 File=$S/dev/nvidia[0-7]
EOF
  cat >"$S/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$S/run/munge.socket
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$S/keys/jwt_hs256.key
DbdHost=localhost
DbdPort=6819
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$(db_port)
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
PidFile=$S/run/slurmdbd.pid
LogFile=$S/log/slurmdbd.log
DebugLevel=info
EOF
  chmod 600 "$S/etc/slurmdbd.conf"
}

# --- processes -----------------------------------------------------------------------------------------

pid_of() { local f="$S/run/$1.pid"; [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"; }
running() { pid_of "$1" >/dev/null; }

wait_for() {  # wait_for <what> <seconds> <command...>
  local what=$1 limit=$2 i
  shift 2
  for ((i = 0; i < limit * 10; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "$what did not become ready within ${limit}s (logs in $S/log)"
}

munge_ok() { munge -n -S "$S/run/munge.socket" | unmunge -S "$S/run/munge.socket"; }
sql() {  # as MariaDB's root: over TCP on the shared server, over the socket on the private one
  if [ "$(db_port)" = "$DB_PORT_PRIVATE" ]; then
    mariadb --no-defaults -S "$S/run/mysqld.sock" -u root "$@"
  else
    mariadb --no-defaults -h 127.0.0.1 -P "$DB_PORT_SHARED" -u root "$@"
  fi
}
db_ok() { sql -e 'select 1'; }
dbd_ok() { sacctmgr -n list cluster; }
ctld_ok() { scontrol ping | grep -q 'is UP'; }
restd_code() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$RESTD_PORT/openapi/v3"; }
restd_ok() { [ "$(restd_code)" = 401 ]; }  # it answers, and wants a token

nodes_ok() {  # every slurmd registered: no node UNKNOWN, DOWN, NOT_RESPONDING or INVAL
  local out
  out=$(scontrol show node -o) || return 1
  [ "$(grep -c 'NodeName=' <<<"$out")" -eq ${#NODES[@]} ] || return 1
  ! grep -Eq 'State=[A-Z+_]*(UNKNOWN|DOWN|NOT_RESPONDING|INVAL)' <<<"$out"
}

start_db() {
  if mariadb --no-defaults -h 127.0.0.1 -P "$DB_PORT_SHARED" -u root -e 'select 1' >/dev/null 2>&1; then
    echo "$DB_PORT_SHARED" >"$S/run/db.port"
  else
    echo "$DB_PORT_PRIVATE" >"$S/run/db.port"
    if ! running mariadbd; then
      [ -x /usr/sbin/mariadbd ] || apt_install mariadb-server
      [ -d "$S/mysql/mysql" ] || mariadb-install-db --no-defaults --user=root --datadir="$S/mysql" \
        --auth-root-authentication-method=socket --skip-test-db >"$S/log/mariadb-install.log" 2>&1
      log "starting a private mariadbd on 127.0.0.1:$DB_PORT_PRIVATE"
      nohup mariadbd --no-defaults --user=root --datadir="$S/mysql" --socket="$S/run/mysqld.sock" \
        --port="$DB_PORT_PRIVATE" --bind-address=127.0.0.1 --skip-name-resolve --pid-file="$S/run/mariadbd.pid" \
        --log-error="$S/log/mariadbd.log" --innodb-buffer-pool-size=64M --skip-log-bin >/dev/null 2>&1 </dev/null &
    fi
    wait_for mariadbd 30 db_ok
  fi
  sql -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
          CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
          CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
          GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
          GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
}

start() {
  mkdir -p "$S/log" "$S/run"
  install_packages
  # Controller state is kept across restarts, as on a real cluster: wiping it would reuse job ids that
  # slurmdbd already holds.
  start_db
  write_config
  mkdir -p "$S/state" "$S/spool"
  if ! running munged; then
    munged --socket="$S/run/munge.socket" --key-file="$S/keys/munge.key" --pid-file="$S/run/munged.pid" \
      --log-file="$S/log/munged.log" --seed-file="$S/keys/munged.seed"
  fi
  wait_for munged 10 munge_ok
  running slurmdbd || slurmdbd
  wait_for slurmdbd 30 dbd_ok
  sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
  # A slurmctld that got TERM keeps its pid for a few seconds while it saves state: let it finish first.
  local i
  for ((i = 0; i < 300; i++)); do
    running slurmctld && ! ctld_ok || break
    sleep 0.1
  done
  running slurmctld || slurmctld
  wait_for slurmctld 30 ctld_ok
  local node
  for node in "${NODES[@]}"; do running "slurmd-$node" || slurmd -N "$node"; done
  wait_for "the slurmd nodes" 60 nodes_ok
  # Node states survive a restart (StateSaveLocation): a node an interrupted run left drained would still be. The
  # tests start from nodes in service: resume any that is drained (Slurm refuses RESUME for the others).
  for node in "${NODES[@]}"; do scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1 || true; done
  if ! running slurmrestd; then
    # It refuses to run as root: -u drops to slurmrest after binding. It stays in the foreground.
    SLURM_JWT=daemon nohup slurmrestd -u slurmrest -s openapi/v0.0.38,openapi/dbv0.0.38 -a rest_auth/jwt \
      "127.0.0.1:$RESTD_PORT" >"$S/log/slurmrestd.log" 2>&1 </dev/null &
    echo $! >"$S/run/slurmrestd.pid"
  fi
  wait_for slurmrestd 30 restd_ok
  log "cluster $CLUSTER is up: ${NODES[*]} x gpu:a100:8"
  print_env
}

stop_group() {  # TERM the named daemons, wait up to 10 s, then KILL what is left
  local name pid pids=() i
  for name in "$@"; do
    pid=$(pid_of "$name") && { kill -TERM "$pid" 2>/dev/null || true; pids+=("$pid"); }
  done
  for ((i = 0; i < 100; i++)); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for name in "$@"; do rm -f "$S/run/$name.pid"; done
}

stop() {
  local daemons=(slurmrestd slurmctld) node
  for node in "${NODES[@]}"; do daemons+=("slurmd-$node"); done
  stop_group "${daemons[@]}"
  stop_group slurmdbd
  stop_group munged mariadbd
  log "stopped"
}

status() {
  local name ok=0 node
  local daemons=(munged slurmdbd slurmctld slurmrestd)
  for node in "${NODES[@]}"; do daemons+=("slurmd-$node"); done
  [ "$(db_port)" = "$DB_PORT_PRIVATE" ] && daemons+=(mariadbd)
  for name in "${daemons[@]}"; do
    if pid=$(pid_of "$name"); then echo "$name running (pid $pid)"; else echo "$name not running"; ok=1; fi
  done
  if [ $ok -eq 0 ] && ctld_ok && nodes_ok && restd_ok; then
    sinfo -N -O 'NodeList:10,StateLong:12,Gres:16,GresUsed:30'
    return 0
  fi
  return 1
}

print_env() {
  cat <<EOF
export SLURM_CONF=$S/etc/slurm.conf
export SLURM_RESTD_URL=http://127.0.0.1:$RESTD_PORT
# A JWT for slurmrestd (X-SLURM-USER-NAME: root, X-SLURM-USER-TOKEN: \$SLURM_JWT):
#   export \$(SLURM_CONF=$S/etc/slurm.conf scontrol token username=root lifespan=3600)
EOF
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) print_env ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
