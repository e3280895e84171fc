/**
 * What the status item and the side panel show, kept fresh by a Lumino `Poll`.
 *
 * The model asks this server's `/gpupool/...` routes (the jupyter-server extension) through a
 * `Fetcher`, so that tests give it a scripted one; it imports no JupyterLab package.
 *
 * - `status` (where this server runs) is polled every `interval`; pools and servers only while
 *   the side panel is open.
 * - A failed request backs off (the poll's interval grows up to `maxInterval`); a success goes
 *   back to `interval`.
 * - The poll stands by while the page is hidden (`standby: 'when-hidden'`).
 */

import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

/** `GET /gpupool/status`: this server's placement. */
export interface IStatus {
  label: string;
  in_pool: boolean;
  pool: string | null;
  platform: string | null;
  gpus: number;
  gpu_type: string | null;
  over_quota: boolean;
  node: string | null;
  user: string | null;
  server: string;
}

/** One pool of `GET /gpupool/pools` (the service's launch options). */
export interface IPool {
  name: string;
  description?: string;
  status?: string;
  gpu_total: number;
  gpu_available: number;
  largest_free_block?: number;
  gpu_types?: string[];
  node_count?: number;
  schedulable_nodes?: number;
  quota?: {
    managed: boolean;
    borrowing: boolean;
    within_quota: number | null;
    available: number | null;
  };
}

/** One server of `GET /gpupool/servers`. */
export interface IServer {
  name: string;
  this: boolean;
  ready: boolean;
  pending: string | null;
  url: string | null;
  pool: string | null;
  node: string | null;
  gpus: number | null;
  over_quota: boolean;
  state: string | null;
}

/** Asks one `/gpupool/` route and gives its JSON (throws on an error answer). */
export type Fetcher = (route: string) => Promise<any>;

const TIMES = '\u00d7';

/** `GPU 2× A100-80G · training-pool`, `CPU · compute-pool`, `not in a GPU pool`. */
export function statusLabel(status: IStatus | null): string {
  if (!status) {
    return 'GPU pool…';
  }
  if (!status.pool) {
    return 'not in a GPU pool';
  }
  if (!status.gpus) {
    return `CPU · ${status.pool}`;
  }
  const kind = status.gpu_type ? ` ${status.gpu_type}` : '';
  return `GPU ${status.gpus}${TIMES}${kind} · ${status.pool}`;
}

/** The status item's tooltip: the node, and what over quota means. */
export function statusTitle(status: IStatus | null): string {
  if (!status || !status.pool) {
    return 'This server was not started in a GPU pool';
  }
  const lines = [`Pool ${status.pool}` + (status.node ? ` on node ${status.node}` : '')];
  lines.push(
    status.over_quota
      ? 'Over quota: this server borrows idle GPUs and may be stopped (reclaimed) when their owners need them back'
      : 'Within quota'
  );
  lines.push('Click for pool availability and your servers');
  return lines.join('\n');
}

/** The user's quota in a pool, in the spawn form's words. */
export function quotaWords(pool: IPool): string {
  const quota = pool.quota;
  if (!quota || !quota.managed) {
    return 'no quota';
  }
  const within = quota.within_quota || 0;
  const available = quota.available || 0;
  if (available > within) {
    return `${within} within quota, ${available} with borrowing`;
  }
  return `${within} GPU${within === 1 ? '' : 's'} within quota`;
}

/** The pool's state for this user, in the spawn form's words. */
export function poolState(pool: IPool): string {
  if (pool.node_count === 0) {
    return 'no nodes';
  }
  if (pool.status === 'unavailable' || pool.schedulable_nodes === 0) {
    return 'nodes not ready';
  }
  if (!pool.gpu_total) {
    return 'CPU only';
  }
  if (!pool.gpu_available || pool.largest_free_block === 0) {
    return 'full';
  }
  const quota = pool.quota;
  if (quota && quota.managed && !quota.available) {
    return 'your quota is used up';
  }
  if (quota && quota.managed && !quota.within_quota && quota.borrowing) {
    return 'borrowing possible (may be reclaimed)';
  }
  return 'free';
}

/** A server's state in the side panel: `running`, `running, over quota`, `spawn`... */
export function serverState(server: IServer): string {
  const state = server.state || (server.ready ? 'running' : server.pending || '');
  return server.over_quota ? `${state}${state ? ', ' : ''}over quota` : state;
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
  }
}

export class GPUPoolModel {
  constructor(options: GPUPoolModel.IOptions) {
    this._fetch = options.fetch;
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

  /** The last error's words, or '' after a success. */
  get error(): string {
    return this._error;
  }

  get label(): string {
    return statusLabel(this._status);
  }

  get title(): string {
    return statusTitle(this._status);
  }

  /** Whether the status item shows in the warning colour: the server runs over quota. */
  get warning(): boolean {
    return !!this._status && this._status.over_quota;
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
      this._error = reason instanceof Error ? reason.message : String(reason);
      this._changed.emit();
      throw reason;
    }
    this._changed.emit();
  }

  dispose(): void {
    this.poll.dispose();
    Signal.clearData(this);
  }

  private _fetch: Fetcher;
  private _status: IStatus | null = null;
  private _pools: IPool[] = [];
  private _servers: IServer[] = [];
  private _error = '';
  private _panelOpen = false;
  private _changed = new Signal<this, void>(this);
}
