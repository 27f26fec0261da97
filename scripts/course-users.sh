#!/bin/sh
# A course for several Unix users on one machine (or on a cluster's shared filesystem), handed in
# through nbgrader's own exchange. Run as root; every step can be run again (idempotent).
#
#   scripts/course-users.sh setup  --instructor teacher --students alice,bob
#   scripts/course-users.sh remove --instructor teacher --students alice,bob   (users, homes, the course's exchange)
#
# setup:
#   - the exchange root (default /srv/nbgrader/exchange), mode 1777 as nbgrader documents it
#     (everyone reads and writes; the sticky bit keeps each course directory its owner's);
#   - the instructor (useradd when missing) and a course root ~INSTRUCTOR/mpilab-course with an
#     nbgrader_config.py that loads the kit's grader/nbgrader_config.py (the kit's grading) and
#     sets the course id, the exchange and a release/ directory of the course's own;
#   - each student (useradd when missing), with ~/.jupyter/nbgrader_config.py (course id,
#     exchange) and the instructor's extensions turned off for that user: Formgrader, Create
#     Assignment and the course list; Assignment List and Validate stay
#     (mpilab/data/course/jupyter/, the files `jupyter ... disable --user` writes);
#   - a line in every user's ~/.bashrc that puts the kit's .venv/bin first on PATH.
# Options: --course ID (default mpilab), --exchange DIR, --kit DIR (the instructor's kit, default
# this checkout), --student-kit DIR (the kit students run: the student release of
# `make student-release` with its own .venv; default --kit), --instructor USER, --students A,B,...
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: scripts/course-users.sh setup|remove --instructor USER --students A,B [--course ID] [--exchange DIR] [--kit DIR] [--student-kit DIR]"
action=${1:-}
case $action in
    setup|remove) shift ;;
    *) echo "course-users.sh: unknown action '${action}'; valid: setup, remove" >&2; echo "$usage" >&2; exit 2 ;;
esac
course=mpilab exchange=/srv/nbgrader/exchange kit=$here student_kit="" instructor="" students=""
while [ $# -gt 0 ]; do
    case $1 in
        --course) course=${2:?--course needs a value}; shift 2 ;;
        --exchange) exchange=${2:?--exchange needs a directory}; shift 2 ;;
        --kit) kit=$(cd "${2:?--kit needs a directory}" && pwd); shift 2 ;;
        --student-kit) student_kit=$(cd "${2:?--student-kit needs a directory}" && pwd); shift 2 ;;
        --instructor) instructor=${2:?--instructor needs a user name}; shift 2 ;;
        --students) students=$(echo "${2:?--students needs A,B,...}" | tr ',' ' '); shift 2 ;;
        *) echo "course-users.sh: unknown option '$1'; valid: --course, --exchange, --kit, --student-kit, --instructor, --students" >&2; exit 2 ;;
    esac
done
[ -n "$instructor" ] && [ -n "$students" ] || { echo "$usage" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "course-users.sh: run it as root (it creates users and the exchange)" >&2; exit 2; }
for name in "$course" "$instructor" $students; do
    case $name in
        ''|-*|*[!a-z0-9_-]*) echo "course-users.sh: '$name' is not a valid name (lower-case letters, digits, - and _)" >&2; exit 2 ;;
    esac
done
case $exchange in /*) ;; *) echo "course-users.sh: --exchange '$exchange' must be an absolute path" >&2; exit 2 ;; esac
student_kit=${student_kit:-$kit}
for k in "$kit" "$student_kit"; do
    [ -x "$k/.venv/bin/nbgrader" ] || { echo "course-users.sh: $k/.venv/bin/nbgrader not found: run make build in $k first" >&2; exit 2; }
done
marker="# mpilab course $course"

home_of() { getent passwd "$1" | cut -d: -f6; }

venv_of() {   # venv_of USER: the .venv/bin of the kit that user runs
    if [ "$1" = "$instructor" ]; then echo "$kit/.venv/bin"; else echo "$student_kit/.venv/bin"; fi
}

as_user() {   # as_user USER CMD...: run CMD as USER in that user's home, with that user's kit
    u=$1; shift
    MPILAB_KIT=$(dirname "$(dirname "$(venv_of "$u")")") "$here/scripts/as-user.sh" "$u" "$@"
}

make_user() {
    id "$1" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$1"
    h=$(home_of "$1")
    # home directories private to their user: students must not read each other's work
    chmod 700 "$h"
    grep -qxF "$marker" "$h/.bashrc" 2>/dev/null || printf '%s\nexport PATH=%s:$PATH\n' "$marker" "$(venv_of "$1")" >> "$h/.bashrc"
    chown "$1:" "$h/.bashrc"
    as_user "$1" mkdir -p "$h/.jupyter"
}

write_as() {   # write_as USER FILE: stdin into FILE, owned by USER
    as_user "$1" sh -c 'cat > "$1"' sh "$2"
}

if [ "$action" = remove ]; then
    for u in "$instructor" $students; do
        if id "$u" >/dev/null 2>&1; then
            pkill -KILL -u "$u" 2>/dev/null || true
            userdel --remove "$u" 2>/dev/null || userdel "$u"
            echo "removed user $u"
        fi
    done
    rm -rf "${exchange:?}/$course"
    echo "removed $exchange/$course"
    exit 0
fi

mkdir -p "$exchange"
chmod 1777 "$exchange"

make_user "$instructor"
ihome=$(home_of "$instructor")
root=$ihome/mpilab-course
as_user "$instructor" mkdir -p "$root"
write_as "$instructor" "$root/nbgrader_config.py" <<PY
"""nbgrader configuration of course '$course' (written by scripts/course-users.sh).

The kit's grading ($kit/grader/nbgrader_config.py: trusted verdicts, guarded execution, the
students' C files graded as submitted) with this course's id, exchange and release directory.
Run nbgrader, and $kit/scripts/grade.sh with COURSE=$root, from here.
"""
c = get_config()  # noqa: F821 (provided by nbgrader)
load_subconfig("$kit/grader/nbgrader_config.py")  # noqa: F821
c.CourseDirectory.root = "$root"
c.CourseDirectory.source_directory = "$kit/solutions"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.course_id = "$course"
c.Exchange.root = "$exchange"
PY
# Formgrader and the instructor's nbgrader commands find the course from any directory
write_as "$instructor" "$ihome/.jupyter/nbgrader_config.py" <<PY
c = get_config()  # noqa: F821
load_subconfig("$root/nbgrader_config.py")  # noqa: F821
PY

for s in $students; do
    make_user "$s"
    shome=$(home_of "$s")
    write_as "$s" "$shome/.jupyter/nbgrader_config.py" <<PY
"""nbgrader configuration of a student of course '$course' (written by scripts/course-users.sh)."""
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "$course"
c.Exchange.root = "$exchange"
PY
    # what `jupyter labextension disable --level=user` and `jupyter server extension disable
    # --user` would write (nbgrader docs, "Installation"), copied: the commands take ~15 s each
    as_user "$s" cp -r "$kit/mpilab/data/course/jupyter/." "$shome/.jupyter/"
done

if [ -d "$student_kit/solutions" ]; then
    echo "course-users.sh: warning: $student_kit holds solutions/ and the answer key, readable by the students;" \
         "for a real course give them the student release (make student-release) with --student-kit" >&2
fi
echo "course '$course': exchange $exchange, instructor $instructor (course root $root), students: $students"
