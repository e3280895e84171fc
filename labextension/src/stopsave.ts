/**
 * Work saved before a stop (issue 31): what the lab does about the server's notices.
 *
 * - Every notice is announced once, when it first appears (a notice is its kind and deadline:
 *   the same rule warning again with a new deadline is a new notice).
 * - When a notice that ends in a stop has its deadline within `lead` seconds (60) on the
 *   server's clock, the open documents are saved, once per notice, and the user is told why.
 *
 * `StopWatcher` decides; `index.ts` carries it out (JupyterLab's notifications, the document
 * manager's save-all, `POST /gpupool/saved`). Pure: no JupyterLab import, so that jest tests it
 * in node.
 */

import { clockWords } from './model';
import { INotice } from './notice';

/** Seconds before a stop's deadline when the open documents are saved. */
export const SAVE_LEAD = 60;

/** What one look at the notices asks for. */
export interface IStep {
  /** The notices seen for the first time (to announce), most urgent first. */
  announce: INotice[];
  /** The stop whose deadline is near (save the documents now), or null. */
  save: INotice | null;
}

/** `idle@1800000000`: a notice as the watcher remembers it. */
export function noticeKey(notice: INotice): string {
  return `${notice.kind}@${notice.deadline ?? ''}`;
}

/** Whether `notice` is a stop whose deadline is within `lead` seconds of `now` (or past). */
export function stopIsNear(notice: INotice, now: number, lead: number = SAVE_LEAD): boolean {
  return (
    notice.action === 'stop' &&
    typeof notice.deadline === 'number' &&
    notice.deadline - now <= lead
  );
}

/** A toast's longest message: JupyterLab's notifications cut a message after 140 characters. */
export const TOAST_LENGTH = 140;

/** What each kind of notice is called in a toast (the details are behind its link). */
const KIND_TITLES: { [kind: string]: string } = {
  idle: 'Idle GPUs',
  runtime: 'Runtime limit',
  budget: 'GPU-hour budget',
  booking: 'Booking'
};

/** `Runtime limit`: a notice's kind, as a toast starts. */
export function kindTitle(notice: INotice): string {
  return KIND_TITLES[notice.kind] || notice.kind || 'Notice';
}

/** `this server stops at 14:05 UTC`, `this server is being stopped` once due. */
export function stopWords(notice: INotice, now: number): string {
  return typeof notice.deadline === 'number' && notice.deadline > now
    ? `this server stops at ${clockWords(notice.deadline, now)}`
    : 'this server is being stopped';
}

/** `Saving your work: this server stops at 14:05 UTC.` */
export function savingWords(notice: INotice, now: number): string {
  return `Saving your work: ${stopWords(notice, now)}.`;
}

/** `1 notebook saved: this server stops at 14:05 UTC.`, `Nothing unsaved: ...`, once saved. */
export function savedNoticeWords(paths: string[], notice: INotice, now: number): string {
  return `${savedWords(paths)}: ${stopWords(notice, now)}.`;
}

/**
 * A new notice as a toast, said once and short: `Runtime limit: this server stops at 14:05
 * UTC.` for a stop (the service's words, which say why and say the time again, are behind the
 * toast's Details link and in the status item's tooltip); a notice that only reports in its own
 * words, or `Booking: see Details.` where they would not fit a toast.
 */
export function announceWords(notice: INotice, now: number): string {
  const title = kindTitle(notice);
  if (notice.action === 'stop') {
    return `${title}: ${stopWords(notice, now)}.`;
  }
  const words = notice.words.trim();
  const said = `${words.charAt(0).toUpperCase()}${words.slice(1)}${/[.!?]$/.test(words) ? '' : '.'}`;
  return said.length <= TOAST_LENGTH ? said : `${title}: see Details.`;
}

/** `1 notebook saved`, `3 notebooks saved`, `2 documents saved` (a mix), `Nothing unsaved`. */
export function savedWords(paths: string[]): string {
  if (!paths.length) {
    return 'Nothing unsaved';
  }
  const notebooks = paths.every(p => p.endsWith('.ipynb'));
  const what = notebooks ? 'notebook' : 'document';
  return `${paths.length} ${what}${paths.length === 1 ? '' : 's'} saved`;
}

/** Remembers the notices it has announced and the stops it has saved for. */
export class StopWatcher {
  constructor(lead: number = SAVE_LEAD) {
    this.lead = lead;
  }

  readonly lead: number;

  /** Look at the server's notices (`notices`, or its one `notice`) at `now` (the server's
   * clock, in seconds). */
  step(notices: (INotice | null | undefined)[], now: number): IStep {
    const valid = notices.filter(
      (n): n is INotice => !!n && typeof n.words === 'string' && typeof n.kind === 'string'
    );
    const announce: INotice[] = [];
    for (const notice of valid) {
      const key = noticeKey(notice);
      if (!this._announced.has(key)) {
        this._announced.add(key);
        announce.push(notice);
      }
    }
    let save: INotice | null = null;
    for (const notice of valid) {
      const key = noticeKey(notice);
      if (stopIsNear(notice, now, this.lead) && !this._saved.has(key)) {
        this._saved.add(key);
        save = notice;
        break; // one save covers every stop due now; the others are remembered next time
      }
    }
    if (save) {
      for (const notice of valid) {
        if (stopIsNear(notice, now, this.lead)) {
          this._saved.add(noticeKey(notice));
        }
      }
    }
    return { announce, save };
  }

  private _announced = new Set<string>();
  private _saved = new Set<string>();
}
