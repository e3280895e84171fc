/**
 * The status bar item: `2 × A100-80G · training-pool · 45%` or `CPU · compute-pool`, in the
 * warning colour when the server runs over quota (`jp-gpupool-warning`) or when its GPUs are
 * idle and it will be stopped (`jp-gpupool-warning` and `jp-gpupool-idle`; the label says the
 * time left: `· idle, stops in 55m`), or when another notice ends in a stop (a runtime limit,
 * a spent budget, a booking: `jp-gpupool-warning` and `jp-gpupool-notice`; `· runtime limit,
 * stops in 4m`). A click calls `onClick` (opens the panel).
 */

import { Widget } from '@lumino/widgets';

import { GPUPoolModel } from './model';

export class GPUPoolStatus extends Widget {
  constructor(model: GPUPoolModel, onClick: () => void) {
    super({ node: document.createElement('div') });
    this._model = model;
    this.id = 'jp-gpupool-status';
    this.addClass('jp-gpupool-status');
    // as JupyterLab's clickable items (the kernel's, the line/column one): hover highlight
    this.addClass('jp-mod-highlighted');
    // the text in the status bar's own text style, so it lines up with its neighbours'
    this._text = document.createElement('span');
    this._text.className = 'jp-StatusBar-TextItem';
    this.node.appendChild(this._text);
    this.node.setAttribute('role', 'button');
    this.node.tabIndex = 0;
    this.node.addEventListener('click', onClick);
    this.node.addEventListener('keydown', event => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        onClick();
      }
    });
    model.changed.connect(this._render, this);
    this._render();
  }

  dispose(): void {
    this._model.changed.disconnect(this._render, this);
    super.dispose();
  }

  private _render(): void {
    this._text.textContent = this._model.label;
    this.node.title = this._model.error
      ? `${this._model.title}\n(last update failed: ${this._model.error})`
      : this._model.title;
    this.toggleClass('jp-gpupool-warning', this._model.warning);
    this.toggleClass('jp-gpupool-idle', this._model.idleWarning);
    this.toggleClass('jp-gpupool-notice', this._model.noticeWarning);
  }

  private _model: GPUPoolModel;
  private _text: HTMLSpanElement;
}
