// mpilab's JupyterLab plugin: when a notebook runs a cell while a file of the notebook's own
// folder is open in an editor with edits not yet saved, say so.
//
// The lab's checks and benchmarks run in the kernel and read the C files from disk; an editor's
// buffer is only in the browser. Without this, editing ring.c, forgetting Ctrl+S and running the
// check tests the old file, silently. The plugin imports nothing from JupyterLab: it listens to
// the application's command registry (every way of running a cell is a command), looks for
// dirty documents among the main area's widgets, and raises the warning through JupyterLab's own
// notification command, with a button that saves those files.

const PLUGIN_ID = "mpilab-saved-check:plugin";
const SAVE_COMMAND = "mpilab:save-lab-files";
/** Commands that run notebook cells: notebook:run-cell, notebook:run-cell-and-select-next
 * (Shift+Enter), notebook:run-all-cells, notebook:restart-run-all, runmenu:run, ... */
const RUNS_CELLS = /^(notebook|runmenu):(restart-)?run/;

function folderOf(path) {
  const slash = path.lastIndexOf("/");
  return slash < 0 ? "" : path.slice(0, slash + 1);
}

function baseName(path) {
  return path.slice(path.lastIndexOf("/") + 1);
}

/** The document contexts open in the main area, each once (a file may have several views). */
function openContexts(app) {
  const contexts = new Map();
  for (const widget of app.shell.widgets("main")) {
    const context = widget.context;
    if (context && context.path && context.model && !contexts.has(context.path)) {
      contexts.set(context.path, context);
    }
  }
  return contexts;
}

/** Paths of the files under ``folder`` (not notebooks) whose editor holds unsaved edits. */
function unsavedFiles(app, folder) {
  const paths = [];
  for (const [path, context] of openContexts(app)) {
    if (context.model.dirty && path.startsWith(folder) && !path.endsWith(".ipynb")) {
      paths.push(path);
    }
  }
  return paths.sort();
}

/** The warning, short enough for JupyterLab's toast (it cuts a message at 140 characters). */
function warningText(paths) {
  const names = paths.map(baseName);
  const list = names.length === 1 ? names[0] : `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
  const what = names.length === 1 ? "has unsaved edits: this cell used the saved file" :
    "have unsaved edits: this cell used the saved files";
  return `${list} ${what}, not your editor's. Save (Ctrl+S) and run it again.`;
}

const plugin = {
  id: PLUGIN_ID,
  description: "Warns when a cell runs while a file of its lab has unsaved edits.",
  autoStart: true,
  activate(app) {
    // The warning on screen, replaced by the next one. Runs are chained: two cells run in quick
    // succession must not both show a warning because the first one's id was not known yet.
    let shown = Promise.resolve(null);

    app.commands.addCommand(SAVE_COMMAND, {
      label: "Save the lab's unsaved files",
      execute: async (args) => {
        const contexts = openContexts(app);
        for (const path of (args && args.paths) || []) {
          const context = contexts.get(path);
          if (context && context.model.dirty) {
            await context.save();
          }
        }
      },
    });

    app.commands.commandExecuted.connect((_, executed) => {
      if (!RUNS_CELLS.test(executed.id)) {
        return;
      }
      const notebook = app.shell.currentWidget;
      const path = notebook && notebook.context && notebook.context.path;
      if (!path || !path.endsWith(".ipynb")) {
        return;
      }
      const paths = unsavedFiles(app, folderOf(path));
      if (paths.length === 0) {
        return;
      }
      const message = warningText(paths);
      const label = paths.length === 1 ? `Save ${baseName(paths[0])}` : "Save them";
      shown = shown.then(async (previous) => {
        if (previous !== null) {
          await app.commands.execute("apputils:dismiss-notification", { id: previous }).catch(() => undefined);
        }
        return app.commands.execute("apputils:notify", {
          message,
          type: "warning",
          options: {
            autoClose: false,
            actions: [{
              label,
              commandId: SAVE_COMMAND,
              args: { paths },
              caption: "Save these files; then run the cell again",
            }],
          },
        });
      }).catch((error) => {
        console.error(`${PLUGIN_ID}: could not show the unsaved-files warning`, error);
        return null;
      });
    });
  },
};

export default plugin;
