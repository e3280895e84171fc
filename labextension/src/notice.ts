/**
 * A server's most urgent warning (`notice` in the service's server rows, forwarded by
 * `GET /gpupool/use`): the idle policy's, the runtime limit's, a spent budget's, a booking's.
 * Its `words` say what and when; `deadline` (epoch seconds) is when the service acts, `action`
 * what it does then (`stop`, or `report` to the admins only). The status item shows the time
 * left to a stop (`· runtime limit, stops in 4m`) in the warning colour; the tooltip and the
 * side panel the words with it. The idle one is left to the idle words (they say the same).
 *
 * Pure: no JupyterLab import, so that the model's tests run in node.
 */

/** One notice, as `core/time/notices.py`'s `Notice.as_json` writes it. */
export interface INotice {
  kind: string;
  words: string;
  deadline?: number | null;
  action?: string;
}

/** What the status item calls each kind. */
const KIND_WORDS: { [kind: string]: string } = {
  idle: 'idle',
  runtime: 'runtime limit',
  budget: 'budget',
  booking: 'booking'
};

/** `4m`, `1h05m`, `20s`: the time left, as the Python side's `countdown` says it. */
export function countdown(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h) {
    return `${h}h${String(m).padStart(2, '0')}m`;
  }
  return m ? `${m}m` : `${s % 60}s`;
}

/** The notice to show beside the idle words: a notice that is not the idle policy's, or null. */
export function otherNotice(notice: INotice | null | undefined): INotice | null {
  return notice && typeof notice.words === 'string' && notice.kind !== 'idle' ? notice : null;
}

/** Whether the notice ends in a stop (the status item's warning colour). */
export function stopNotice(notice: INotice | null | undefined): boolean {
  return !!otherNotice(notice) && notice!.action === 'stop';
}

/** `· runtime limit, stops in 4m`, `· runtime limit, stopping` once due, `· budget` for a
 * notice that only reports; '' without one. */
export function noticeLabel(notice: INotice | null | undefined, now: number): string {
  const n = otherNotice(notice);
  if (!n) {
    return '';
  }
  const kind = KIND_WORDS[n.kind] || n.kind;
  if (n.action !== 'stop' || n.deadline === null || n.deadline === undefined) {
    return ` · ${kind}`;
  }
  const left = n.deadline - now;
  return left >= 1 ? ` · ${kind}, stops in ${countdown(left)}` : ` · ${kind}, stopping`;
}

/** The notice's words with the time left: `<words> (stops in 4m)`, `(due in 4m)` for a
 * report, `(stopping)` once a stop is due (as `%gpupool status` says it); null without one. */
export function noticeWords(notice: INotice | null | undefined, now: number): string | null {
  const n = otherNotice(notice);
  if (!n) {
    return null;
  }
  if (n.deadline === null || n.deadline === undefined) {
    return n.words;
  }
  if (n.deadline <= now) {
    return `${n.words} (${n.action === 'stop' ? 'stopping' : 'due now'})`;
  }
  return `${n.words} (${n.action === 'stop' ? 'stops' : 'due'} in ${countdown(n.deadline - now)})`;
}
