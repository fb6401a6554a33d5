# The body of Sandbox.kill_all_processes (see its docstring), run by a fresh root `docker exec`.
# Spares pid 1, this shell ($$), and the main process: pid 1's child with the earliest start time
# (fields after the `(comm)` of /proc/<pid>/stat: $2 is the ppid, ${20} the start time), but only
# under docker-init (without init, pid 1 is the main process and its children are orphans).
kill -STOP -1 2>/dev/null
main= first=
case "$(cat /proc/1/comm)" in docker-init|tini)
  for d in /proc/[0-9]*; do
    read -r s < "$d/stat" 2>/dev/null || continue
    s=${s##*) }; set -- $s
    if [ "$2" = 1 ] && { [ -z "$first" ] || [ "${20}" -lt "$first" ]; }; then first=${20}; main=${d#/proc/}; fi
  done;;
esac
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  case "$p" in 1|$$|"$main") ;; *) kill -KILL "$p" 2>/dev/null;; esac
done
[ -n "$main" ] && kill -CONT "$main"
true
