/**
 * After this server stops (issue 40): its `/gpupool/...` routes are gone, and the hub answers
 * them with its own 404 page (or 424/503 while the server is down). The status item then says
 * the server was stopped and, from the last notice it saw, why; it stops polling.
 *
 * Pure: no JupyterLab import, so that jest tests it in node.
 */

import { INotice } from './notice';

/** The answers that mean this server's routes are gone: the hub's "not found" (the server is
 * not running), "server not running" (424) and the proxy's "unavailable" (503). */
const GONE = [404, 424, 503];

/** A request that the hub, not this server's extension, answered: the server is gone. */
export class ServerGoneError extends Error {
  constructor(readonly status: number) {
    super(`${status}: this server no longer answers`);
    this.name = 'ServerGoneError';
  }
}

/** Whether an error answer (`status`, its body parsed as JSON or not) is the hub's or the
 * proxy's, not the extension's: one of `GONE` with a body that is not the extension's JSON. */
export function goneAnswer(status: number, json: boolean): boolean {
  return GONE.includes(status) && !json;
}

/** Why the last notice says the server was stopped, in a few words. */
const REASONS: { [kind: string]: string } = {
  idle: 'its GPUs stayed idle',
  runtime: 'it reached its runtime limit',
  budget: 'a GPU-hour budget was spent',
  booking: 'a booking needed its GPUs'
};

/** Seconds around a stop notice's deadline within which the stop is taken to be its own. */
export const STOP_SLACK = 120;

/** What the server was stopped for: the last stop notice seen, when its deadline had come or
 * was near when the server went; null otherwise (stopped by its user, an admin, the hub). */
export function stopReason(notice: INotice | null | undefined, now: number): string | null {
  if (!notice || notice.action !== 'stop' || typeof notice.deadline !== 'number') {
    return null;
  }
  if (notice.deadline - now > STOP_SLACK) {
    return null;
  }
  return REASONS[notice.kind] || null;
}

/** The status item's label once the server is gone: `Server stopped` (`· idle`...). */
export function stoppedLabel(notice: INotice | null | undefined, now: number): string {
  const reason = stopReason(notice, now);
  return reason && notice ? `Server stopped · ${notice.kind}` : 'Server stopped';
}

/** Its tooltip: that it was stopped, when it was noticed (`when`: `14:05 UTC`), why (when a
 * notice said so), and what to do next. */
export function stoppedTitle(
  notice: INotice | null | undefined,
  now: number,
  when: string
): string {
  const reason = stopReason(notice, now);
  return [
    reason
      ? `This server was stopped (seen at ${when}): ${reason}.`
      : `This server was stopped (seen at ${when}), by you, an admin or the hub.`,
    'Start a new one from the hub’s home page; My GPUs says more.'
  ].join('\n');
}
