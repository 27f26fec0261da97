#!/bin/sh
# Grade an assignment without JupyterHub: collect from an LMS zip (if one is there), release,
# autograde each submission in grader/submitted/<student>/<lab>/ (one nbgrader run per student,
# so one bad submission cannot stall or change the others), generate feedback, export grades
# to CSV, and print the score table per graded cell.
#   scripts/grade.sh lab2            (or: make grade ASSIGNMENT=lab2)
#   scripts/grade.sh --slurm lab2    (or: make grade ASSIGNMENT=lab2 SLURM=1) one SLURM array task
#                                    per student that needs grading (mpilab/grade/batch.py): a
#                                    rerun grades only changed submissions and failed tasks
# Env: MPILAB_CELL_TIMEOUT (s, per notebook cell; default 600), MPILAB_STUDENT_TIMEOUT (s, wall
# limit of one student's whole autograde; default 3600), COURSE (default grader/),
# MPILAB_DB_URL (the gradebook's database; default the course's SQLite gradebook.db; with
# --slurm and no URL, the course's own MariaDB from scripts/gradebook-db.sh, started if needed),
# MPILAB_GRADE_PARTITION, MPILAB_GRADE_CPUS (per task, default 2) for --slurm.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: scripts/grade.sh [--slurm] ASSIGNMENT (e.g. lab2)"
mode=serial
case "${1:-}" in
    --slurm) mode=slurm; shift ;;
    --task) mode=task; tasklist=${2:?$usage}; shift 2 ;;  # one array task (grade.sh --slurm submits it)
    -*) echo "grade.sh: unknown option '$1'; $usage" >&2; exit 2 ;;
esac
assignment=${1:?$usage}
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
if [ "$(id -u)" -eq 0 ] && [ "$owner" != "0:0" ] && [ "$mode" != task ]; then
    trap 'chown -R "$owner" "$course"' EXIT
fi
# what the sandbox hides from student code and grading kernels (mpilab.grade.sandbox.COURSE_ENV):
# the course being graded, but for the kernel's own directory
MPILAB_COURSE_ROOT=$(pwd -P) && export MPILAB_COURSE_ROOT
# Array tasks write to the gradebook at once: a database server, never the SQLite file.
if [ "$mode" = slurm ]; then
    case "${MPILAB_DB_URL:-}" in
        sqlite*) echo "grade.sh: --slurm needs a gradebook that many tasks can write to at once, not MPILAB_DB_URL='$MPILAB_DB_URL'; unset it to use the course's own MariaDB (scripts/gradebook-db.sh), or give a mysql+pymysql:// URL" >&2; exit 2 ;;
        "") db_out=$(COURSE="$course" "$here/scripts/gradebook-db.sh" start) \
                || { echo "grade.sh: --slurm could not start the course's gradebook database (scripts/gradebook-db.sh)" >&2; exit 1; }
            MPILAB_DB_URL=$(printf '%s\n' "$db_out" | tail -n 1)
            export MPILAB_DB_URL
            echo "grade.sh: gradebook: the course's MariaDB (scripts/gradebook-db.sh; MPILAB_DB_URL)" ;;
    esac
fi
if [ "$mode" != task ]; then
# say once how student code runs here (confined as the sandbox user, or not: and why); this also
# creates the sandbox user if it is missing, before any student's turn
python - <<'PY'
from mpilab.grade import sandbox
confined, note = sandbox.isolation()
if confined:
    print(f"grade.sh: student code, grading kernels and the trusted grader run confined as {sandbox.sandbox_user()[0]}"
          + (f" ({note})" if note else ""))
else:
    print(f"grade.sh: student code, grading kernels and the trusted grader are NOT confined: {note}")
# a later section runs on the kit's compiled reference while a student's C task fails: the
# kernels cannot read the answer key to build it, so it is built for them here
from mpilab.grade import references
for d in references.prepare_for_kernels():
    print(f"grade.sh: compiled references for the later sections: {d}")
PY
nbgrader generate_assignment "$assignment" --create --force --log-level=WARN
if [ -d "downloaded/$assignment/archive" ] && [ -n "$(ls -A "downloaded/$assignment/archive")" ]; then
    python -m mpilab.grade.intake archives "$assignment"
    nbgrader zip_collect "$assignment" --force --log-level=WARN
fi
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
# grade_one STUDENT: autograde one student within the limit, and record how it ended
# (autograde-state/<lab>/<student>.json; mpilab/grade/batch.py). Returns non-zero when it did not
# end well, so that an array task that failed says so to SLURM.
grade_one() {
    student=$1
    start=$(date +%s)
    rc=0
    # what is not a regular file or a folder, or too large, moves to refused/ (mpilab.grade.intake)
    # an unscreened submission is never graded (fail closed): nbgrader would follow its links
    # (in every mode: serial, and in each SLURM array task before its nbgrader run)
    if ! python -m mpilab.grade.intake before "$assignment" "$student"; then
        echo "grade.sh: intake of $student failed (see above); not graded; continuing" >&2
        python -m mpilab.grade.batch record "$course" "$assignment" "$student" "$(( $(date +%s) - start ))" "intake failed"
        return 1
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
    # what the intake refused, or why nothing was graded, goes into the student's feedback
    python -m mpilab.grade.intake after "$assignment" "$student" "$status" || echo "grade.sh: no intake notes for $student" >&2
    python -m mpilab.grade.batch record "$course" "$assignment" "$student" "$(( $(date +%s) - start ))" "$status"
    [ "$status" = ok ]
}
if [ "$mode" = task ]; then
    student=$(sed -n "$(( ${SLURM_ARRAY_TASK_ID:?grade.sh --task runs as a SLURM array task} + 1 ))p" "$tasklist")
    [ -n "$student" ] || { echo "grade.sh: array task $SLURM_ARRAY_TASK_ID has no student in $tasklist" >&2; exit 2; }
    echo "grade.sh: task $SLURM_ARRAY_TASK_ID on $(hostname): grading $student"
    # The student's notebook runs as in the serial path: MPI inside it must not take this task's
    # allocation for its own (Open MPI would see one slot and refuse 2 ranks). What the record
    # needs is kept under other names.
    MPILAB_GRADE_JOB=$SLURM_ARRAY_JOB_ID MPILAB_GRADE_TASK=$SLURM_ARRAY_TASK_ID
    MPILAB_GRADE_NODE=${SLURMD_NODENAME:-$(hostname)}
    export MPILAB_GRADE_JOB MPILAB_GRADE_TASK MPILAB_GRADE_NODE
    for var in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\|SLURMD_[A-Za-z0-9_]*\|PMIX_[A-Za-z0-9_]*\|PMI_[A-Za-z0-9_]*\)=.*/\1/p'); do
        unset "$var"
    done
    grade_one "$student"
    exit $?
fi
if [ "$mode" = slurm ]; then
    todo=$(python -m mpilab.grade.batch pending "$course" "$assignment")
    total=$(python -c 'import sys; from mpilab.grade.batch import submitted; print(len(submitted(*sys.argv[1:])))' "$course" "$assignment")
    if [ -z "$todo" ]; then
        echo "grade.sh: all $total submissions were graded as they are now into this gradebook; nothing to grade"
    else
        n=$(printf '%s\n' "$todo" | wc -l)
        state="$course/autograde-state/$assignment"
        mkdir -p "$state/logs"
        tasklist="$state/array-$(date +%Y%m%dT%H%M%S).list"
        printf '%s\n' "$todo" > "$tasklist"
        partlimit=$(sinfo -h -o %l ${MPILAB_GRADE_PARTITION:+-p "$MPILAB_GRADE_PARTITION"} | head -n 1)
        limits=$(python -m mpilab.grade.batch limits "$limit" "$partlimit")
        minutes=${limits% *} limit=${limits#* }
        export MPILAB_STUDENT_TIMEOUT="$limit"
        job=$(sbatch --parsable --requeue --array="0-$((n - 1))" --job-name="mpilab-grade-$assignment" \
            --cpus-per-task="${MPILAB_GRADE_CPUS:-2}" --time="$minutes" \
            ${MPILAB_GRADE_PARTITION:+--partition="$MPILAB_GRADE_PARTITION"} \
            --chdir="$course" --output="$state/logs/%A_%a.out" --export=ALL \
            --wrap="exec '$here/scripts/grade.sh' --task '$tasklist' '$assignment'") \
            || { echo "grade.sh: sbatch refused the grading array (see above)" >&2; exit 1; }
        job=${job%%;*}
        echo "grade.sh: grading $n of $total students as SLURM array job $job (logs: $state/logs/)"
        left=$(python -m mpilab.grade.batch watch "$job" "$course" "$assignment" "$tasklist")
        if [ -n "$left" ]; then
            echo "grade.sh: not graded this time: $(echo "$left" | tr '\n' ' ')(see $state/logs/); run the same command again to grade only these" >&2
        fi
    fi
else
    for dir in submitted/*/"$assignment"; do
        [ -d "$dir" ] || continue
        grade_one "$(basename "$(dirname "$dir")")" || true
    done
fi
python -m mpilab.grade.batch times "$course" "$assignment"
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
