/**
 * jupyter-gpupool: a status bar item showing the GPU pool this server runs in; a click opens a
 * side panel with pool availability and the user's servers.
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { IStatusBar } from '@jupyterlab/statusbar';

import { GPUPoolModel } from './model';
import { GPUPoolPanel } from './panel';
import { requestAPI } from './request';
import { GPUPoolStatus } from './status';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-gpupool:status',
  description: 'The GPU pool this server runs in, pool availability and your servers.',
  autoStart: true,
  optional: [IStatusBar],
  activate: (app: JupyterFrontEnd, statusBar: IStatusBar | null) => {
    if (!statusBar) {
      return;
    }
    const model = new GPUPoolModel({ fetch: route => requestAPI(route) });
    let panel: GPUPoolPanel | null = null;
    const open = () => {
      if (!panel || panel.isDisposed) {
        panel = new GPUPoolPanel(model);
        app.shell.add(panel, 'right', { rank: 900 });
      }
      app.shell.activateById(panel.id);
    };
    const item = new GPUPoolStatus(model, open);
    statusBar.registerStatusItem(plugin.id, {
      item,
      align: 'left',
      rank: 100,
      isActive: () => true
    });
    void model.poll.start();
  }
};

export default plugin;
