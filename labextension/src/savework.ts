/**
 * Work saved before a stop (issue 31), in JupyterLab: at each change of the model, the
 * `StopWatcher` (src/stopsave.ts) says which notices are new and whether a stop is near.
 *
 * - A new notice: a JupyterLab notification (Lab 4's notification API), short enough for a
 *   toast ("Runtime limit: this server stops at 14:05 UTC.", stopsave.announceWords), and a
 *   "Details" link to the service's My GPUs page, where its words are.
 * - A stop within a minute: the documents open in the main area that have unsaved changes are
 *   counted, `docmanager:save-all` saves them, a notification says so ("Saving your work:
 *   this server stops at 14:05 UTC.") and then how many were saved ("1 notebook saved: this
 *   server stops at 14:05 UTC."; with nothing unsaved, that at once: "Nothing unsaved: ..."),
 *   the why behind its Details link, and
 *   `POST /gpupool/saved` tells the server extension which (it records them in the service's
 *   ledger, so that the stop says "3 notebooks saved before the stop").
 */

import { JupyterFrontEnd } from '@jupyterlab/application';
import { Notification } from '@jupyterlab/apputils';

import { GPUPoolModel } from './model';
import { INotice } from './notice';
import {
  StopWatcher,
  announceWords,
  noticeKey,
  savedNoticeWords,
  savingWords
} from './stopsave';

/** What `POST /gpupool/saved` takes. */
export interface ISavedReport {
  count: number;
  paths: string[];
  notice: { kind: string; deadline: number | null };
}

/** Sends a report to the server extension. */
export type PostSaved = (report: ISavedReport) => Promise<unknown>;

/** The document of a main-area widget, when it is one: its path and whether it is dirty. */
interface IDocumentLike {
  path: string;
  dirty: boolean;
}

function documentOf(widget: unknown): IDocumentLike | null {
  const context = (widget as { context?: any }).context;
  if (!context || typeof context.path !== 'string' || !context.model) {
    return null;
  }
  return { path: context.path, dirty: !!context.model.dirty };
}

/** The paths of the documents open in the main area with unsaved changes. */
export function dirtyPaths(app: JupyterFrontEnd): string[] {
  const paths = new Set<string>();
  for (const widget of app.shell.widgets('main')) {
    const doc = documentOf(widget);
    if (doc && doc.dirty) {
      paths.add(doc.path);
    }
  }
  return [...paths];
}

/** Follow the model's notices for as long as it lives. */
export function watchStops(app: JupyterFrontEnd, model: GPUPoolModel, post: PostSaved): void {
  const watcher = new StopWatcher();
  const details = () => {
    const url = (model.status && model.status.pages_url) || '';
    return url
      ? [{ label: 'Details', callback: () => window.open(url, '_blank'), displayType: 'link' as const }]
      : [];
  };
  model.changed.connect(() => {
    const use = model.use;
    if (!use) {
      return;
    }
    const notices = use.notices && use.notices.length ? use.notices : [use.notice];
    const now = model.now;
    const step = watcher.step(notices, now);
    for (const notice of step.announce) {
      Notification.warning(announceWords(notice, now), {
        autoClose: 20 * 1000,
        actions: details()
      });
    }
    if (step.save) {
      void saveWork(app, step.save, now, post, details());
    }
  });
}

async function saveWork(
  app: JupyterFrontEnd,
  notice: INotice,
  now: number,
  post: PostSaved,
  actions: Notification.IAction[]
): Promise<void> {
  const before = dirtyPaths(app);
  let saved: string[] = [];
  if (!before.length) {
    // nothing to save: say so at once (a "Saving..." toast updated in the same tick is never
    // shown updated: the toast is not on the page yet, and the update is lost)
    Notification.warning(savedNoticeWords(saved, notice, now), { autoClose: 20 * 1000, actions });
  } else {
    const id = Notification.warning(savingWords(notice, now), { autoClose: false, actions });
    try {
      await app.commands.execute('docmanager:save-all');
    } catch (reason) {
      console.warn('jupyter-gpupool: save-all failed', reason);
    }
    const still = new Set(dirtyPaths(app));
    saved = before.filter(p => !still.has(p));
    const done = {
      message: savedNoticeWords(saved, notice, now),
      type: (saved.length < before.length ? 'error' : 'warning') as Notification.TypeOptions,
      autoClose: false as const,
      actions
    };
    if (!Notification.update({ id, ...done })) {
      Notification.dismiss(id);
      Notification.emit(done.message, done.type, { autoClose: false, actions });
    }
  }
  try {
    await post({
      count: saved.length,
      paths: saved,
      notice: { kind: notice.kind, deadline: notice.deadline ?? null }
    });
  } catch (reason) {
    console.warn(`jupyter-gpupool: the save before ${noticeKey(notice)} was not recorded`, reason);
  }
}
