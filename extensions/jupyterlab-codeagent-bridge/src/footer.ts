import { InputDialog, Notification } from '@jupyterlab/apputils';
import { CodeCell, type Cell, type ICellFooter } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import type { ISettingRegistry } from '@jupyterlab/settingregistry';
import { PanelLayout, Widget } from '@lumino/widgets';
import { EditorState } from '@codemirror/state';
import { EditorView } from '@codemirror/view';
import { unifiedMergeView } from '@codemirror/merge';
import { BridgeRequestError, bridgeUrl, buildEditRequest, requestEdit, type EditAction } from './logic/request';
import { explicitSettings, timeoutSeconds } from './logic/settings';
import { ProposalTracker, type Proposal } from './logic/proposal';

/** What every footer shares: where the bridge is, and the user's settings once loaded. */
export interface FooterContext {
  serverSettings: ServerConnection.ISettings;
  settings: () => ISettingRegistry.ISettings | null;
}

/** The notebook panel a cell belongs to (cell → notebook → panel). */
function panelOf(cell: Widget): NotebookPanel | null {
  let w: Widget | null = cell.parent;
  while (w && !(w instanceof NotebookPanel)) w = w.parent;
  return w;
}

const ACTIONS: { action: EditAction; label: string; title: string }[] = [
  { action: 'optimize', label: 'Optimize', title: 'Ask the code agent to make this cell faster or clearer' },
  { action: 'fix', label: 'Fix', title: 'Ask the code agent to fix the error of this cell' },
  { action: 'edit', label: 'Edit…', title: 'Tell the code agent how to change this cell' },
];

function button(label: string, cls: string, title = ''): HTMLButtonElement {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = label;
  b.title = title;
  b.className = `jp-Button codeagent-Button ${cls}`;
  return b;
}

/**
 * The footer under a code cell: optimize / fix / edit, progress with cancel, the proposal as an
 * inline diff with Accept, Accept & Run and Reject, and failures. Markdown and raw cells get the
 * same widget (the content factory cannot tell), hidden by CSS.
 */
export class CodeagentCellFooter extends Widget implements ICellFooter {
  private readonly tracker = new ProposalTracker();
  private readonly actionButtons: HTMLButtonElement[] = [];
  private readonly spinner = document.createElement('span');
  private readonly status = document.createElement('span');
  private readonly cancelButton = button('Cancel', 'codeagent-cancel', 'Give up waiting for the code agent');
  private readonly proposalBox = document.createElement('div');
  private readonly explanation = document.createElement('div');
  private readonly diffHost = document.createElement('div');
  private readonly errorBox = document.createElement('div');
  private diffView: EditorView | null = null;
  private inFlight: AbortController | null = null;
  private watching: Cell | null = null;

  constructor(private readonly ctx: FooterContext) {
    super();
    this.addClass('jp-CellFooter');
    this.addClass('codeagent-CellFooter');
    const bar = document.createElement('div');
    bar.className = 'codeagent-actions';
    for (const a of ACTIONS) {
      const b = button(a.label, `codeagent-${a.action}`, a.title);
      b.dataset.action = a.action;
      b.addEventListener('click', () => void this.run(a.action));
      this.actionButtons.push(b);
      bar.appendChild(b);
    }
    this.spinner.className = 'codeagent-spinner';
    this.spinner.hidden = true;
    this.status.className = 'codeagent-status';
    this.cancelButton.hidden = true;
    this.cancelButton.addEventListener('click', () => this.inFlight?.abort());
    bar.append(this.spinner, this.status, this.cancelButton);

    this.proposalBox.className = 'codeagent-proposal';
    this.proposalBox.hidden = true;
    this.explanation.className = 'codeagent-explanation';
    this.diffHost.className = 'codeagent-diff';
    const choices = document.createElement('div');
    choices.className = 'codeagent-choices';
    const accept = button('Accept', 'codeagent-accept jp-mod-accept', 'Replace the cell source (undo with Ctrl+Z)');
    const acceptRun = button('Accept & Run', 'codeagent-accept-run jp-mod-accept', 'Replace the cell source and run the cell');
    const reject = button('Reject', 'codeagent-reject jp-mod-reject', 'Keep the cell as it is');
    accept.addEventListener('click', () => void this.accept(false));
    acceptRun.addEventListener('click', () => void this.accept(true));
    reject.addEventListener('click', () => this.discard());
    choices.append(accept, acceptRun, reject);
    this.proposalBox.append(this.explanation, this.diffHost, choices);

    this.errorBox.className = 'codeagent-error';
    this.errorBox.hidden = true;
    this.errorBox.setAttribute('role', 'alert');
    this.node.append(bar, this.proposalBox, this.errorBox);
  }

  private get cell(): CodeCell | null {
    return this.parent instanceof CodeCell ? this.parent : null;
  }

  /** Sends the cell to the bridge for `action`; a pending proposal is discarded first. */
  async run(action: EditAction): Promise<void> {
    const cell = this.cell;
    if (!cell || this.inFlight) return;
    this.discard();
    this.showError(null);
    let instruction: string | undefined;
    if (action === 'edit') {
      const answer = await InputDialog.getText({
        title: 'Edit this cell with the code agent',
        label: 'What should change?',
        placeholder: 'e.g. use a list comprehension',
      });
      if (!answer.button.accept || (answer.value ?? '').trim() === '') return;
      instruction = answer.value ?? '';
    }
    const panel = panelOf(cell);
    const source = cell.model.sharedModel.getSource();
    const settings = this.ctx.settings();
    const timeoutS = timeoutSeconds(settings?.composite);
    const request = buildEditRequest({
      notebookPath: panel?.context.path ?? '',
      action,
      cell: { id: cell.model.id, source, cell_type: cell.model.type, outputs: cell.model.outputs.toJSON() },
      instruction,
      settings: explicitSettings(settings?.user),
    });
    const requestId = this.tracker.start(source);
    this.inFlight = new AbortController();
    this.setBusy(true, `${ACTIONS.find((a) => a.action === action)?.label.replace('…', '')}: waiting for the code agent…`);
    const server = this.ctx.serverSettings;
    try {
      const answer = await requestEdit(
        (url, init) => ServerConnection.makeRequest(url, init, server),
        bridgeUrl(server.baseUrl, 'edit'),
        request,
        timeoutS,
        this.inFlight.signal,
      );
      const outcome = this.tracker.receive(requestId, answer.source, answer.explanation, cell.model.sharedModel.getSource());
      if ('proposal' in outcome) {
        this.showProposal(outcome.proposal, cell);
      } else if (outcome.discarded === 'stale') {
        this.status.textContent = '';
        this.showError('The cell changed while the code agent was working; its proposal was discarded. Click again to ask about the current source.', false);
      }
    } catch (err) {
      this.tracker.reset();
      if (err instanceof BridgeRequestError && err.kind === 'cancelled') {
        this.status.textContent = 'Cancelled.';
      } else {
        this.status.textContent = '';
        const e = err instanceof BridgeRequestError ? err : new BridgeRequestError('network', String(err), 'Try again.');
        this.showError(`${e.cause_} ${e.fix}`.trim(), true);
      }
    } finally {
      this.inFlight = null;
      this.setBusy(false);
    }
  }

  /** Progress: buttons disabled, spinner and cancel shown; the status line is set by the caller. */
  private setBusy(busy: boolean, text?: string): void {
    for (const b of this.actionButtons) b.disabled = busy;
    this.spinner.hidden = !busy;
    this.cancelButton.hidden = !busy;
    if (text !== undefined) this.status.textContent = text;
    this.toggleClass('codeagent-mod-busy', busy);
  }

  private showError(message: string | null, notify = true): void {
    this.errorBox.hidden = message === null;
    this.errorBox.textContent = message ?? '';
    if (message !== null && notify) Notification.error(`Code agent: ${message}`, { autoClose: false });
  }

  private showProposal(p: Proposal, cell: CodeCell): void {
    this.explanation.textContent = p.explanation;
    this.diffView?.destroy();
    this.diffView = new EditorView({
      parent: this.diffHost,
      state: EditorState.create({
        doc: p.proposed,
        extensions: [
          EditorView.editable.of(false),
          EditorState.readOnly.of(true),
          EditorView.lineWrapping,
          unifiedMergeView({ original: p.original, mergeControls: false, gutter: true }),
        ],
      }),
    });
    this.proposalBox.hidden = false;
    this.status.textContent = 'Proposal:';
    this.watch(cell);
  }

  /** While a proposal is pending, an edit of the cell makes it stale: drop it. */
  private watch(cell: CodeCell): void {
    if (this.watching === cell) return;
    this.unwatch();
    // eslint-disable-next-line @typescript-eslint/unbound-method -- Lumino binds the slot to its thisArg (the second argument)
    cell.model.sharedModel.changed.connect(this.onCellChanged, this);
    this.watching = cell;
  }

  private unwatch(): void {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- Lumino matches the slot with its thisArg (the second argument)
    this.watching?.model.sharedModel.changed.disconnect(this.onCellChanged, this);
    this.watching = null;
  }

  private onCellChanged(): void {
    const cell = this.cell;
    if (cell && this.tracker.sourceChanged(cell.model.sharedModel.getSource())) {
      this.hideProposal();
      this.status.textContent = 'The cell changed: the proposal was discarded.';
    }
  }

  private hideProposal(): void {
    this.unwatch();
    this.proposalBox.hidden = true;
    this.diffView?.destroy();
    this.diffView = null;
  }

  /** Rejects (or silently drops) the pending proposal. */
  discard(): void {
    this.tracker.reset();
    this.hideProposal();
    this.status.textContent = '';
  }

  private async accept(andRun: boolean): Promise<void> {
    const cell = this.cell;
    if (!cell) return;
    const shared = cell.model.sharedModel;
    this.unwatch();
    const next = this.tracker.accept(shared.getSource());
    this.hideProposal();
    if (next === null) {
      this.status.textContent = 'The cell changed: the proposal was discarded.';
      return;
    }
    // One undo step: close the current capture group, replace in one transaction, close again.
    // (YCodeCell has a Y.UndoManager; the interface does not expose it.)
    const undo = (shared as { undoManager?: { stopCapturing(): void } | null }).undoManager;
    undo?.stopCapturing();
    shared.setSource(next);
    undo?.stopCapturing();
    this.status.textContent = 'Applied (Ctrl+Z undoes it).';
    if (andRun) {
      const panel = panelOf(cell);
      if (panel) await CodeCell.execute(cell, panel.sessionContext);
    }
  }

  dispose(): void {
    // The cell is gone (deleted, notebook closed): nobody waits for the answer any more.
    this.inFlight?.abort();
    this.unwatch();
    this.diffView?.destroy();
    super.dispose();
  }
}

/** The footer of a cell, if it is ours (for the toolbar button). */
export function footerOf(cell: Widget): CodeagentCellFooter | null {
  const layout = cell.layout;
  if (!(layout instanceof PanelLayout)) return null;
  return layout.widgets.find((w): w is CodeagentCellFooter => w instanceof CodeagentCellFooter) ?? null;
}
