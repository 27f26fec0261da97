# mpilab — the verbs. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV      ?= .venv
PY        := $(VENV)/bin/python
FLAVOURS  := openmpi mpich smpi
FLAVOUR   ?= openmpi
ASSIGNMENT ?= lab2
PORT      ?= 8888
PYTEST_ARGS ?=
BENCH_ARGS ?=
JOBS      ?= 2
VARIANT   ?= student


# The daily loop: what needs only Python (markers set by tests/conftest.py from the fixtures a
# test uses); a test that launches MPI, SLURM, Apptainer, nbgrader or Chromium unmarked fails.
QUICK := not mpi and not smpi and not slurm and not image and not browser and not nbgrader and not e2e and not serial and not all_images

SHELL_SCRIPTS := scripts/*.sh .ci/run containers/image/*.sh containers/base/*.sh

.PHONY: help setup build demo test test-all _pytest test-quick lint test-images bench lab grade similarity image student-release instructor-guide clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

setup: ## install system packages (when allowed), the .venv and the mpilab package
	@scripts/setup.sh

build: setup ## build c_reference for Open MPI, MPICH and SimGrid SMPI
	@for f in $(FLAVOURS); do $(MAKE) --no-print-directory -C c_reference FLAVOUR=$$f all student || exit 1; done

demo: build ## run the allgather experiment of the homework seed; results under results/demo/
	$(VENV)/bin/mpilab demo -o results/demo

test: build ## run the test suite (real MPI, SMPI, SLURM, nbgrader, browser, the Open MPI student image); JOBS=2 in parallel
	@$(MAKE) --no-print-directory _pytest SELECT="not extended and not all_images"

test-all: build ## make test plus the extended matrix (every cheat on every lab, every lab graded end to end): about 1 h 40 on 2 cores
	@$(MAKE) --no-print-directory _pytest SELECT="not all_images"

_pytest:
	@rc=0; \
	$(PY) -m pytest -rs -n $(JOBS) --dist loadscope --no-loadscope-reorder --durations=25 -m "not serial and ($(SELECT))" $(PYTEST_ARGS) || rc=$$?; \
	echo "--- tests that time real runs against each other, alone:"; \
	$(PY) -m pytest -rs -m "serial and ($(SELECT))" $(PYTEST_ARGS) || { s=$$?; [ $$s -eq 5 ] || rc=$$s; }; \
	exit $$rc

test-quick: ## the daily loop (<5 min): unit and contract tests, no build, no MPI, SLURM, image, browser or grading
	MPILAB_TEST_LAUNCHES=fail $(PY) -m pytest -q -rs -n $(JOBS) --durations=15 -m "$(QUICK)" $(PYTEST_ARGS)

lint: setup ## ruff (lint and format check) over the Python, shellcheck over the shell scripts
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	shellcheck $(SHELL_SCRIPTS)

bench: build ## benchmark (not a test, ~15 min): the kit's allgathers vs MPI_Allgather and SimGrid, collbench vs OSU 7.4; BENCH_ARGS=--help
	$(PY) bench/bench.py $(BENCH_ARGS)

test-images: build ## build all four Apptainer images and run every image test (make test covers one image)
	$(PY) -m pytest -rs --durations=10 tests/test_containers.py $(PYTEST_ARGS)

lab: build ## start JupyterLab on the kit, opened at labs/ (c_reference/ and docs/ in reach; PORT=8888)
	$(VENV)/bin/jupyter lab --notebook-dir=. --LabApp.default_url=/lab/tree/labs --port=$(PORT) --no-browser $(if $(filter 0,$(shell id -u)),--allow-root,)

grade: build ## autograde grader/submitted/ for ASSIGNMENT=lab2 and export grades (SLURM=1: a job array)
	@[ -x scripts/grade.sh ] || { echo "make grade is the instructor's: this is the student's side of the kit (no grader)"; exit 2; }
	scripts/grade.sh $(if $(filter-out 0 no,$(SLURM)),--slurm,) $(ASSIGNMENT)

similarity: setup ## the similarity report of ASSIGNMENT=lab2's submitted C files (JPlag; needs a JDK 21+ and Maven)
	scripts/similarity.sh $(ASSIGNMENT)

student-release: setup ## write the student's side of the kit (no answers) to dist/student
	$(PY) -m mpilab.grade.release dist/student

instructor-guide: build ## run every solution notebook and write a guide per lab (dist/instructor-guide)
	@$(PY) -c "import mpilab_key" 2>/dev/null || { echo "make instructor-guide needs the answer key (solutions/): it is the instructor's"; exit 2; }
	$(PY) -m mpilab_key.guide --out dist/instructor-guide $(if $(LABS),--labs $(LABS),)

image: ## build build/images/mpilab-FLAVOUR[-instructor].sif: FLAVOUR=openmpi|mpich [VARIANT=instructor] [OSU=URL|TARBALL] [STUDENT_TREE=DIR]
	$(if $(OSU),OSU_SOURCE='$(OSU)') $(if $(STUDENT_TREE),STUDENT_TREE='$(STUDENT_TREE)') scripts/build-image.sh $(FLAVOUR) $(VARIANT)

clean: ## remove build outputs (keeps .venv and results/)
	rm -rf c_reference/build
