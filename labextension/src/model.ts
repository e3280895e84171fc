/**
 * What the status item and the side panel show, kept fresh by a Lumino `Poll`.
 *
 * The model asks this server's `/gpupool/...` routes (the jupyter-server extension) through a
 * `Fetcher`, so that tests give it a scripted one; it imports no JupyterLab package.
 *
 * - `status` (where this server runs) is polled every `interval`; with it, when the server has
 *   GPUs, `use` (what its GPUs do: utilization, memory, idle and when it will be stopped);
 *   pools and servers only while the side panel is open.
 * - A failed request backs off (the poll's interval grows up to `maxInterval`); a success goes
 *   back to `interval`. A failed `use` does not: the label stays, the tooltip says why.
 * - The words are the notebook's (`%gpupool status`, jupyter_gpupool/core/words/gpu_use.py):
 *   `45% (max 90%), memory 31.0 of 160 GiB`, `idle since 14:05 UTC; will be stopped at
 *   16:05 UTC`, durations as the idle policy says them (`1h05m`, `55m`, `30s`).
 * - The poll stands by while the page is hidden (`standby: 'when-hidden'`).
 * - Once the server is gone (a `ServerGoneError`: the hub answers its routes), the model says it
 *   was stopped, and why when the last notice it saw was a stop come due (src/stopped.ts), and
 *   stops polling.
 */

import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { INotice, noticeLabel, noticeWords, stopNotice } from './notice';
import { ServerGoneError, stoppedLabel, stoppedTitle } from './stopped';

/** `GET /gpupool/status`: this server's placement. */
export interface IStatus {
  label: string;
  in_pool: boolean;
  pool: string | null;
  platform: string | null;
  gpus: number;
  gpu_type: string | null;
  /** The shape admitted (issue 29): `whole`, `mig-1g.10gb`, `shared-4`...; absent or null from
   * a spawner without shapes. */
  shape?: string | null;
  /** Its words: `MIG 1g.10gb of an A100-80G`. */
  shape_text?: string | null;
  /** What it counts as, in GPU-equivalents: `1/7`, `2`. */
  gpu_equivalents?: string | null;
  over_quota: boolean;
  node: string | null;
  user: string | null;
  server: string;
  /** The service's pages (My GPUs) as the browser reaches them: `/services/gpupool/`. */
  pages_url?: string | null;
}

/** One pool of `GET /gpupool/pools` (the service's launch options). */
export interface IPool {
  name: string;
  description?: string;
  status?: string;
  /** All its GPUs in GPU-equivalents (a MIG A100 is 1, an A10 time-sliced in 4 is 1). */
  gpu_total: number;
  /** Whole GPUs free on nodes that take servers, less what admissions hold. */
  gpu_available: number;
  /** Whole GPUs alone (the service's `whole_gpus`); absent from older services. */
  whole_gpus?: { total: number; used: number; free: number };
  /** Its GPUs by kind: `16 whole + 1 in MIG instances: 3 of 4 instances free`. */
  gpus_text?: string;
  /** What its nodes offer: each shape's free units and what one counts (GPU-equivalents). */
  shapes?: { id: string; kind: string; free: number; equivalent_gpus: number }[];
  largest_free_block?: number;
  /** Requests waiting in line for it now. */
  waiting?: number;
  gpu_types?: string[];
  node_count?: number;
  schedulable_nodes?: number;
  quota?: {
    managed: boolean;
    borrowing: boolean;
    within_quota: number | null;
    available: number | null;
    /** The most GPU-equivalents within quota (3.86 after a 1/7 slice of 4). */
    within_equivalents?: number | null;
  };
}

/** One server of `GET /gpupool/servers`. */
export interface IServer extends IGPUUse {
  name: string;
  this: boolean;
  ready: boolean;
  pending: string | null;
  url: string | null;
  pool: string | null;
  node: string | null;
  gpus: number | null;
  /** What it has, in every surface's words: `MIG 1g.10gb of an A100-80G`, `2× A100-80G`. */
  shape_text?: string | null;
  over_quota: boolean;
  state: string | null;
}

/** A server's `idle` in the service's answers: null while its GPUs are not idle. */
export interface IIdle {
  /** Since when (epoch seconds) its GPUs have been idle. */
  since: number;
  /** Whether the policy's warning time has come. */
  warned?: boolean;
  /** When the policy acts (epoch seconds). */
  due_at?: number | null;
  /** When it will be stopped: `due_at` under `action: stop`, else null. */
  stops_at?: number | null;
  action?: string;
}

/** What a server's GPUs do: the fields of the service's server rows. */
export interface IGPUUse {
  gpu_utilization?: number | null;
  gpu_utilization_max?: number | null;
  gpu_memory_used_mib?: number | null;
  gpu_memory_total_mib?: number | null;
  measured_at?: number | null;
  idle?: IIdle | null;
  /** The most urgent warning about the server (idle, runtime, budget, booking), or null. */
  notice?: INotice | null;
  /** Every warning about the server, most urgent first (issue 31: each is announced). */
  notices?: INotice[] | null;
}

/** `GET /gpupool/use`: what this server's GPUs do, with the server's clock. */
export interface IUse extends IGPUUse {
  /** 0 when the server has no GPUs (nothing was asked). */
  gpus?: number;
  /** Where the service's measurements come from (`dcgm`, `prometheus`, `none`). */
  source?: string | null;
  /** Why the service measures nothing now. */
  problem?: string | null;
  /** Why the service could not be asked (or counts no pod of this server). */
  error?: string | null;
  /** The server's clock (epoch seconds) when it answered. */
  now: number;
}

/** Asks one `/gpupool/` route and gives its JSON (throws on an error answer). */
export type Fetcher = (route: string) => Promise<any>;

const TIMES = '\u00d7';

/** Whether the status says the server runs with GPUs in a pool (then `use` is asked). */
export function hasGPUs(status: IStatus | null): boolean {
  return !!status && !!status.pool && status.gpus > 0;
}

/**
 * `value` with `digits` decimals, as Python's `f"{value:.{digits}f}"`: a value exactly
 * half-way is rounded to the even digit (`2.5` → `2`), where `toFixed` rounds it up.
 */
export function fixed(value: number, digits: number): string {
  const up = value.toFixed(digits);
  const exact = value.toFixed(Math.min(100, digits + 40)); // the value's own decimals
  const cut = exact.indexOf('.') + (digits ? digits + 1 : 0);
  const rest = exact.slice(cut + (digits ? 0 : 1));
  const kept = exact.slice(0, cut);
  if (/^50*$/.test(rest) && Number(kept.slice(-1)) % 2 === 0) {
    return kept;
  }
  return up;
}

/** `50%` (whole percent); null for no value. */
export function percent(value: number | null | undefined): string | null {
  return value === null || value === undefined ? null : `${fixed(Number(value), 0)}%`;
}

/** MiB as GiB with one decimal (`31.0`); without `decimals` a whole number loses its `.0`. */
export function gib(mib: number, decimals = true): string {
  const text = fixed(Number(mib) / 1024, 1);
  return !decimals && text.endsWith('.0') ? text.slice(0, -2) : text;
}

/** Seconds as the idle policy says them: `1h05m`, `55m`, `2m30s`, `30s`. */
export function durationWords(seconds: number): string {
  const s = Math.max(0, Number(fixed(seconds, 0)));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  const two = (n: number) => String(n).padStart(2, '0');
  if (h) {
    return `${h}h${two(m)}m`;
  }
  if (m) {
    return sec ? `${m}m${two(sec)}s` : `${m}m`;
  }
  return `${sec}s`;
}

/** A time (epoch seconds) as a clock says it, `14:05 UTC`; with its date when it is not
 * `now`'s day (`2025-01-30 14:05 UTC`). */
export function clockWords(t: number, now: number): string {
  const when = new Date(t * 1000).toISOString(); // 2025-01-30T14:05:09.000Z
  const day = new Date(now * 1000).toISOString().slice(0, 10);
  const clock = `${when.slice(11, 16)} UTC`;
  return when.slice(0, 10) === day ? clock : `${when.slice(0, 10)} ${clock}`;
}

/** `50% (max 90%), memory 31.0 of 160 GiB`: the mean, the busiest GPU when it differs, the
 * memory when measured; null when the utilization is not measured. */
export function utilizationLine(use: IGPUUse | null): string | null {
  const mean = use ? percent(use.gpu_utilization) : null;
  if (!use || mean === null) {
    return null;
  }
  const most = percent(use.gpu_utilization_max);
  let words = most === null || most === mean ? mean : `${mean} (max ${most})`;
  const used = use.gpu_memory_used_mib;
  const total = use.gpu_memory_total_mib;
  if (used !== null && used !== undefined && total !== null && total !== undefined) {
    words += `, memory ${gib(used)} of ${gib(total, false)} GiB`;
  } else if (used !== null && used !== undefined) {
    words += `, memory ${gib(used)} GiB used`;
  }
  return words;
}

function idleOf(idle: IIdle | null | undefined): IIdle | null {
  return idle && idle.since !== null && idle.since !== undefined ? idle : null;
}

/** Seconds until the server is stopped (negative once due); null unless it is idle under a
 * policy that stops it. */
export function stopsIn(idle: IIdle | null | undefined, now: number): number | null {
  const i = idleOf(idle);
  if (!i || i.action === 'report' || i.stops_at === null || i.stops_at === undefined) {
    return null;
  }
  return Number(i.stops_at) - now;
}

/** A server's `idle` as a cell: `idle 1h05m, stops in 55m`, `idle 2h00m, stopping` (due),
 * `idle 10m (report)` (the policy only reports), `idle 10m`; null while not idle. */
export function idleCell(idle: IIdle | null | undefined, now: number): string | null {
  const i = idleOf(idle);
  if (!i) {
    return null;
  }
  const words = `idle ${durationWords(now - Number(i.since))}`;
  if (i.action === 'report') {
    return `${words} (report)`;
  }
  const left = stopsIn(i, now);
  if (left === null) {
    return words;
  }
  return left >= 1 ? `${words}, stops in ${durationWords(left)}` : `${words}, stopping`;
}

/** A server's `idle` as a line: `idle since 14:05 UTC; will be stopped at 16:05 UTC` (or
 * `...; being stopped` once due), `idle since 14:05 UTC; reported to admins` (`...; will be
 * reported to admins at 16:05 UTC` before it is due); null while not idle. */
export function idleLine(idle: IIdle | null | undefined, now: number): string | null {
  const i = idleOf(idle);
  if (!i) {
    return null;
  }
  const words = `idle since ${clockWords(Number(i.since), now)}`;
  if (i.action === 'report') {
    const due = i.due_at;
    if (due !== null && due !== undefined && Number(due) > now) {
      return `${words}; will be reported to admins at ${clockWords(Number(due), now)}`;
    }
    return `${words}; reported to admins`;
  }
  const stops = i.stops_at;
  if (stops === null || stops === undefined) {
    return words;
  }
  if (Number(stops) > now) {
    return `${words}; will be stopped at ${clockWords(Number(stops), now)}`;
  }
  return `${words}; being stopped`;
}

/** Whether the status item warns of the idle stop: idle under a policy that stops it, and
 * warned (the policy's `warn` before the stop; always once the stop is due). */
export function idleWarning(use: IGPUUse | null, now: number): boolean {
  const left = use ? stopsIn(use.idle, now) : null;
  return left !== null && (use!.idle!.warned !== false || left < 1);
}

/** Whether the server has a part of a GPU (a MIG instance, a shared GPU, a HAMi slice): a shape
 * other than whole GPUs, with its words. */
export function shaped(status: IStatus): boolean {
  return Boolean(
    status.gpus && status.shape && status.shape !== 'whole' && status.shape_text
  );
}

/**
 * `2 × A100-80G · training-pool`, `MIG 1g.10gb of an A100-80G · training-pool` (a shape
 * other than whole GPUs), `CPU · compute-pool`, `not in a GPU pool`; with what the
 * GPUs do when measured (`· 45%`) and, idle under a policy that stops it, the time left
 * (`· idle, stops in 55m`, `· idle, stopping` once due). `now`: the server's clock (seconds).
 */
export function statusLabel(
  status: IStatus | null,
  use: IUse | null = null,
  now: number = Date.now() / 1000
): string {
  if (!status) {
    return 'GPU pool…';
  }
  if (!status.pool) {
    return 'not in a GPU pool';
  }
  if (!status.gpus) {
    return `CPU · ${status.pool}`;
  }
  // what it has in every surface's words (the service's `shape_text`: `2 × A100-80G`, `MIG
  // 1g.10gb of an A100-80G`); a spawner without them gave the count and type alone, said alike
  const has = status.shape_text || `${status.gpus} ${TIMES} ${status.gpu_type || 'GPU'}`;
  let label = `${has} · ${status.pool}`;
  if (!use) {
    return label;
  }
  const measured = percent(use.gpu_utilization);
  if (measured !== null) {
    label += ` · ${measured}`;
  }
  const left = stopsIn(use.idle, now);
  if (left !== null) {
    label += left >= 1 ? ` · idle, stops in ${durationWords(left)}` : ' · idle, stopping';
  }
  return label + noticeLabel(use.notice, now);
}

/** `GPU utilization 45% (max 90%), memory 31.0 of 160 GiB`, `GPU utilization not measured
 * (why)`, `GPU utilization unknown: why` (the words of `%gpupool status`). */
export function useLine(use: IUse | null, error = ''): string {
  if (error || !use) {
    return `GPU utilization unknown: ${error || 'not asked yet'}`;
  }
  if (use.error) {
    return `GPU utilization unknown: ${use.error}`;
  }
  const measured = utilizationLine(use);
  if (measured !== null) {
    return `GPU utilization ${measured}`;
  }
  return 'GPU utilization not measured' + (use.problem ? ` (${use.problem})` : '');
}

/** `GPUs idle since 14:05 UTC; will be stopped at 16:05 UTC (in 55m)`; null while not idle. */
export function idleWords(use: IUse | null, now: number): string | null {
  const line = use ? idleLine(use.idle, now) : null;
  if (line === null) {
    return null;
  }
  const left = stopsIn(use!.idle, now);
  const after = left !== null && left >= 1 ? ` (in ${durationWords(left)})` : '';
  return `GPUs ${line}${after}`;
}

/**
 * The status item's tooltip: the node, what over quota means and, for a server with GPUs,
 * what they do and when an idle server will be stopped. `useError`: why `use` failed.
 */
export function statusTitle(
  status: IStatus | null,
  use: IUse | null = null,
  now: number = Date.now() / 1000,
  useError = ''
): string {
  if (!status || !status.pool) {
    return 'This server was not started in a GPU pool';
  }
  const lines = [`Pool ${status.pool}` + (status.node ? ` on node ${status.node}` : '')];
  lines.push(
    status.over_quota
      ? 'Over quota: this server borrows idle GPUs and may be stopped (reclaimed) when their owners need them back'
      : 'Within quota'
  );
  if (hasGPUs(status) && (use || useError)) {
    lines.push(useLine(use, useError));
    const idle = useError ? null : idleWords(use, now);
    if (idle !== null) {
      lines.push(idle);
    }
    const notice = useError || !use ? null : noticeWords(use.notice, now);
    if (notice !== null) {
      lines.push(notice);
    }
  }
  lines.push('Click for pool availability and your servers');
  return lines.join('\n');
}

export namespace GPUPoolModel {
  export interface IOptions {
    fetch: Fetcher;
    /** Milliseconds between polls when all is well (default 10 s). */
    interval?: number;
    /** The longest interval a failing poll backs off to (default 5 min). */
    maxInterval?: number;
    /** When to stand by (default: while the page is hidden). */
    standby?: Poll.Standby | (() => boolean | Poll.Standby);
    /** This page's clock in milliseconds (default `Date.now`); tests set it. */
    clock?: () => number;
  }
}

export class GPUPoolModel {
  constructor(options: GPUPoolModel.IOptions) {
    this._fetch = options.fetch;
    this._clock = options.clock ?? (() => Date.now());
    this.poll = new Poll({
      auto: false,
      factory: () => this.refresh(),
      frequency: {
        interval: options.interval ?? 10 * 1000,
        backoff: true,
        max: options.maxInterval ?? 5 * 60 * 1000
      },
      name: 'jupyter-gpupool:model',
      standby: options.standby ?? 'when-hidden'
    });
  }

  /** The poll that keeps the model fresh; `start()` it. */
  readonly poll: Poll;

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get status(): IStatus | null {
    return this._status;
  }

  get pools(): IPool[] {
    return this._pools;
  }

  get servers(): IServer[] {
    return this._servers;
  }

  /** What this server's GPUs do (the last `use` answer); null without GPUs or when `use`
   * failed (then `useError` says why). */
  get use(): IUse | null {
    return this._use;
  }

  /** Why the last `use` request failed, or ''. */
  get useError(): string {
    return this._useError;
  }

  /** The server's clock now, in seconds: this page's clock corrected by the difference seen
   * when the last `use` answered (its `now`). */
  get now(): number {
    return (this._clock() + this._skew) / 1000;
  }

  /** The last error's words, or '' after a success. */
  get error(): string {
    return this._error;
  }

  get label(): string {
    if (this._stoppedAt !== null) {
      return stoppedLabel(this._lastNotice, this._stoppedAt);
    }
    return statusLabel(this._status, this._use, this.now);
  }

  get title(): string {
    if (this._stoppedAt !== null) {
      const at = this._stoppedAt;
      return stoppedTitle(this._lastNotice, at, clockWords(at, at));
    }
    return statusTitle(this._status, this._use, this.now, this._useError);
  }

  /** Whether this server was seen stopped (its routes gone); the poll is then disposed. */
  get stopped(): boolean {
    return this._stoppedAt !== null;
  }

  /** The tooltip's line about the GPUs' utilization; '' without GPUs. */
  get useLine(): string {
    return hasGPUs(this._status) && (this._use || this._useError)
      ? useLine(this._use, this._useError)
      : '';
  }

  /** `GPUs idle since 14:05 UTC; will be stopped at 16:05 UTC (in 55m)`, or ''. */
  get idleWords(): string {
    return (hasGPUs(this._status) && idleWords(this._use, this.now)) || '';
  }

  /** Whether the server's GPUs are idle and it will be stopped (warned by the policy). */
  get idleWarning(): boolean {
    return hasGPUs(this._status) && idleWarning(this._use, this.now);
  }

  /** The server's notice other than the idle one (runtime, budget, booking) with the time
   * left: `<words> (stops in 4m)`, or ''. */
  get noticeWords(): string {
    return (hasGPUs(this._status) && this._use && noticeWords(this._use.notice, this.now)) || '';
  }

  /** Whether that notice ends in a stop. */
  get noticeWarning(): boolean {
    return hasGPUs(this._status) && !!this._use && stopNotice(this._use.notice);
  }

  /** Whether the status item shows in the warning colour: the server runs over quota, its
   * idle GPUs will get it stopped, or a notice says it will be stopped. */
  get warning(): boolean {
    return (
      this.stopped ||
      (!!this._status && this._status.over_quota) ||
      this.idleWarning ||
      this.noticeWarning
    );
  }

  /** Whether the side panel is open: pools and servers are asked for only then. */
  get panelOpen(): boolean {
    return this._panelOpen;
  }

  set panelOpen(open: boolean) {
    if (open === this._panelOpen) {
      return;
    }
    this._panelOpen = open;
    if (open && !this.poll.isDisposed) {
      void this.poll.refresh();
    }
  }

  get isDisposed(): boolean {
    return this.poll.isDisposed;
  }

  /**
   * Ask the server once; rejects when a request fails (the poll then backs off), after
   * keeping the error's words for the panel.
   */
  async refresh(): Promise<void> {
    try {
      this._status = (await this._fetch('status')) as IStatus;
      await this._askUse();
      if (this._panelOpen) {
        const [pools, servers] = await Promise.all([
          this._fetch('pools'),
          this._fetch('servers')
        ]);
        this._pools = ((pools && pools.pools) || []) as IPool[];
        this._servers = ((servers && servers.servers) || []) as IServer[];
      }
      this._error = '';
    } catch (reason) {
      if (reason instanceof ServerGoneError) {
        this._gone();
        return;
      }
      this._error = reason instanceof Error ? reason.message : String(reason);
      this._changed.emit();
      throw reason;
    }
    this._changed.emit();
  }

  /** The server is gone: keep the last notice seen (why it stopped), say so, stop polling
   * (after this tick: the poll is not disposed from inside its own factory). */
  private _gone(): void {
    this._lastNotice = (this._use && this._use.notice) || null;
    this._stoppedAt = this.now;
    this._error = '';
    this._changed.emit();
    void Promise.resolve().then(() => this.poll.dispose());
  }

  dispose(): void {
    this.poll.dispose();
    Signal.clearData(this);
  }

  /** Ask `use` when the status says the server has GPUs; a failure is kept in `useError`
   * and does not fail the poll. */
  private async _askUse(): Promise<void> {
    if (!hasGPUs(this._status)) {
      this._use = null;
      this._useError = '';
      return;
    }
    try {
      const use = (await this._fetch('use')) as IUse;
      if (use && typeof use.now === 'number') {
        this._skew = use.now * 1000 - this._clock();
      }
      this._use = use;
      this._useError = '';
    } catch (reason) {
      this._use = null;
      this._useError = reason instanceof Error ? reason.message : String(reason);
    }
  }

  private _fetch: Fetcher;
  private _clock: () => number;
  private _skew = 0;
  private _use: IUse | null = null;
  private _useError = '';
  private _status: IStatus | null = null;
  private _pools: IPool[] = [];
  private _servers: IServer[] = [];
  private _error = '';
  private _panelOpen = false;
  private _stoppedAt: number | null = null;
  private _lastNotice: INotice | null = null;
  private _changed = new Signal<this, void>(this);
}
