#!/usr/bin/env bash
# Run a long driver on a lent device machine across several `run` calls (each call <= 10 min).
#
#   bash benchmarks/device/device_session.sh DRIVER WAIT_S [DRIVER ARGS...]
#
# The first call starts DRIVER in its own session (setsid: it outlives the call while the
# machine is held) with its output in /tmp/sg/driver.log; every call then waits up to WAIT_S
# for /tmp/sg/done, printing the driver's step log. When done, /tmp/sg/res.tgz goes to $OUT;
# before that, each call returns what is under /tmp/sg/res so far as $OUT/partial.tgz.
# Call again promptly (the machine is given back after ~30 s idle) until it prints DONE.
set -u
DRIVER=$1
WAIT_S=${2:-540}
mkdir -p /tmp/sg
if [ ! -e /tmp/sg/started ]; then
  touch /tmp/sg/started
  setsid nohup bash "$DRIVER" "${@:3}" >/tmp/sg/driver.log 2>&1 </dev/null &
  echo "started $DRIVER ${*:3} (pid $!)"
fi
end=$(($(date +%s) + WAIT_S))
while [ ! -e /tmp/sg/done ] && [ "$(date +%s)" -lt "$end" ]; do sleep 5; done
cat /tmp/sg/res/steps.log 2>/dev/null
tail -5 /tmp/sg/driver.log
if [ -e /tmp/sg/done ]; then
  cp /tmp/sg/res.tgz "${OUT:-/tmp}/res.tgz" && echo DONE
else
  # what is there so far, in case this is the last call the session's device time allows
  tar czf "${OUT:-/tmp}/partial.tgz" -C /tmp/sg res driver.log 2>/dev/null
  echo "RUNNING (call again)"
fi
