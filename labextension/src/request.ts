/**
 * `requestAPI`: one request to this server's `/gpupool/...` routes, with JupyterLab's
 * settings (base URL, XSRF, the server's authentication).
 */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export async function requestAPI<T = any>(route: string, init: RequestInit = {}): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'gpupool', route);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  const text = await response.text();
  let data: any = text;
  if (text.length > 0) {
    try {
      data = JSON.parse(text);
    } catch {
      // not JSON: keep the text for the message
    }
  }
  if (!response.ok) {
    const message = (data && data.message) || text || response.statusText;
    throw new ServerConnection.ResponseError(response, message);
  }
  return data as T;
}
