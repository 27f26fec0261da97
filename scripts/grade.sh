#!/bin/sh
# Grade an assignment without JupyterHub: collect from an LMS zip (if one is there), release,
# autograde each submission in grader/submitted/<student>/<lab>/ (one nbgrader run per student,
# so one bad submission cannot stall or change the others), generate feedback, export grades
# to CSV, and print the score table per graded cell.
#   scripts/grade.sh lab2            (or: make grade ASSIGNMENT=lab2)
# Env: MPILAB_CELL_TIMEOUT (s, per notebook cell; default 600), MPILAB_STUDENT_TIMEOUT (s, wall
# limit of one student's whole autograde; default 3600), COURSE (default grader/).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
assignment=${1:?usage: scripts/grade.sh ASSIGNMENT (e.g. lab2)}
course=${COURSE:-$here/grader}
venv=$here/.venv/bin
[ -x "$venv/nbgrader" ] && PATH=$venv:$PATH && export PATH
[ -f "$here/solutions/$assignment/$assignment.ipynb" ] || {
    valid=$(for d in "$here"/solutions/*/; do n=$(basename "$d"); if [ -f "$d/$n.ipynb" ]; then printf '%s ' "$n"; fi; done)
    echo "grade.sh: unknown assignment '$assignment'; valid: $valid" >&2; exit 2; }
limit=${MPILAB_STUDENT_TIMEOUT:-3600}
case $limit in ''|*[!0-9]*|0)
    echo "grade.sh: MPILAB_STUDENT_TIMEOUT='$limit' is not a positive whole number of seconds (e.g. 3600)" >&2; exit 2 ;;
esac
cd "$course"
# The sandbox's namespaces need root. An instructor's course (scripts/course-users.sh) is graded
# with `sudo env COURSE=~teacher/mpilab-course scripts/grade.sh lab2`; whatever this run writes
# there goes back to the course's owner at the end, so the instructor's nbgrader can go on.
owner=$(stat -c %u:%g .)
if [ "$(id -u)" -eq 0 ] && [ "$owner" != "0:0" ]; then
    trap 'chown -R "$owner" "$course"' EXIT
fi
# what the sandbox hides from student code and grading kernels (mpilab.grade.sandbox.COURSE_ENV):
# the course being graded, but for the kernel's own directory
MPILAB_COURSE_ROOT=$(pwd -P) && export MPILAB_COURSE_ROOT
# say once how student code runs here (confined as the sandbox user, or not: and why); this also
# creates the sandbox user if it is missing, before any student's turn
python - <<'PY'
from mpilab.grade import sandbox
confined, note = sandbox.isolation()
if confined:
    print(f"grade.sh: student code and grading kernels run confined as {sandbox.sandbox_user()[0]}"
          + (f" ({note})" if note else ""))
else:
    print(f"grade.sh: student code and grading kernels are NOT confined: {note}")
PY
nbgrader generate_assignment "$assignment" --create --force --log-level=WARN
if [ -d "downloaded/$assignment/archive" ] && [ -n "$(ls -A "downloaded/$assignment/archive")" ]; then
    python -m mpilab.grade.intake archives "$assignment"
    nbgrader zip_collect "$assignment" --force --log-level=WARN
fi
[ -d submitted ] || { echo "grade.sh: no submissions in $course/submitted/<student>/$assignment/" >&2; exit 2; }
# Each student's autograde runs in its own PID namespace when the machine allows it (root, or
# user namespaces): whatever the submission left running (MPI ranks, ipyparallel engines, a
# process that left its session) ends with that autograde, so it cannot slow the next student.
# There nbgrader is the namespace's init, which a TERM from outside does not stop: the limit
# sends KILL at once (and the namespace's end takes the kernel and the rest with it); without a
# namespace nbgrader gets TERM, then KILL 10 s later.
isolate="" stop=TERM
if unshare --pid --fork --kill-child --mount-proc true 2>/dev/null; then
    isolate="unshare --pid --fork --kill-child --mount-proc" stop=KILL
fi
echo "student,seconds,autograde" > "autograde-times-$assignment.csv"
for dir in submitted/*/"$assignment"; do
    [ -d "$dir" ] || continue
    student=$(basename "$(dirname "$dir")")
    start=$(date +%s)
    rc=0
    # what is not a regular file or a folder, or too large, moves to refused/ (mpilab.grade.intake)
    # an unscreened submission is never graded (fail closed): nbgrader would follow its links
    if ! python -m mpilab.grade.intake before "$assignment" "$student"; then
        echo "grade.sh: intake of $student failed (see above); not graded; continuing" >&2
        echo "$student,$(( $(date +%s) - start )),intake failed" >> "autograde-times-$assignment.csv"
        continue
    fi
    # shellcheck disable=SC2086 # $isolate is a command prefix or nothing
    timeout --signal=$stop --kill-after=10 "$limit" $isolate nbgrader autograde "$assignment" --student "$student" \
        --create --force --log-level=WARN || rc=$?
    case $rc in
        0) status=ok ;;
        124|137)
            status="killed at the ${limit} s limit"
            # a half-written autograde has no notebook to give feedback from
            rm -rf "autograded/$student/$assignment"
            echo "grade.sh: autograde of $student stopped at the $limit s limit (MPILAB_STUDENT_TIMEOUT); its ungraded cells score 0; continuing" >&2 ;;
        *)  status="failed (exit $rc)"
            echo "grade.sh: autograde of $student failed (exit $rc); continuing" >&2 ;;
    esac
    python -m mpilab.grade.intake after "$assignment" "$student" "$status" || echo "grade.sh: no intake notes for $student" >&2
    echo "$student,$(( $(date +%s) - start )),$status" >> "autograde-times-$assignment.csv"
done
nbgrader generate_feedback "$assignment" --force --log-level=WARN \
    || echo "grade.sh: generate_feedback reported errors (see above); continuing" >&2
nbgrader export --to "grades-$assignment.csv" --log-level=WARN
python - "$course" "$assignment" <<'PY'
import sys
import pandas as pd
from mpilab.grade.gradebook import score_table
pd.set_option("display.width", 200)
table = score_table(sys.argv[1], sys.argv[2])
times = pd.read_csv(f"autograde-times-{sys.argv[2]}.csv", index_col="student")
# a student whose autograde was stopped before nbgrader saved a grade scores 0 on those cells
table = table.reindex(table.index.union(times.index)).fillna(0)
print(table.join(times).to_string())
PY
echo "grades: $course/grades-$assignment.csv  feedback: $course/feedback/"
