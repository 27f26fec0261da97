#!/bin/sh
# Grade an assignment without JupyterHub: collect from an LMS zip (if one is there), release,
# autograde each submission in grader/submitted/<student>/<lab>/ (one nbgrader run per student,
# so one bad submission cannot stall or change the others), generate feedback, export grades
# to CSV, and print the score table per graded cell.
#   scripts/grade.sh lab2            (or: make grade ASSIGNMENT=lab2)
# Env: MPILAB_CELL_TIMEOUT (s, per notebook cell; default 600), COURSE (default grader/).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
assignment=${1:?usage: scripts/grade.sh ASSIGNMENT (e.g. lab2)}
course=${COURSE:-$here/grader}
venv=$here/.venv/bin
[ -x "$venv/nbgrader" ] && PATH=$venv:$PATH && export PATH
[ -d "$here/solutions/$assignment" ] || {
    echo "grade.sh: unknown assignment '$assignment'; valid: $(ls "$here/solutions" | tr '\n' ' ')" >&2; exit 2; }
cd "$course"
nbgrader generate_assignment "$assignment" --create --force --log-level=WARN
if [ -d "downloaded/$assignment/archive" ] && [ -n "$(ls -A "downloaded/$assignment/archive")" ]; then
    nbgrader zip_collect "$assignment" --force --log-level=WARN
fi
[ -d submitted ] || { echo "grade.sh: no submissions in $course/submitted/<student>/$assignment/" >&2; exit 2; }
: > "autograde-times-$assignment.csv"
echo "student,seconds" >> "autograde-times-$assignment.csv"
for dir in submitted/*/"$assignment"; do
    [ -d "$dir" ] || continue
    student=$(basename "$(dirname "$dir")")
    start=$(date +%s)
    nbgrader autograde "$assignment" --student "$student" --create --force --log-level=WARN \
        || echo "grade.sh: autograde of $student failed; continuing" >&2
    echo "$student,$(( $(date +%s) - start ))" >> "autograde-times-$assignment.csv"
done
nbgrader generate_feedback "$assignment" --force --log-level=WARN
nbgrader export --to "grades-$assignment.csv" --log-level=WARN
python - "$course" "$assignment" <<'PY'
import sys
import pandas as pd
from mpilab.grading import score_table
pd.set_option("display.width", 200)
table = score_table(sys.argv[1], sys.argv[2])
times = pd.read_csv(f"autograde-times-{sys.argv[2]}.csv", index_col="student")
print(table.join(times).to_string())
PY
echo "grades: $course/grades-$assignment.csv  feedback: $course/feedback/"
