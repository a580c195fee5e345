// handover.js: the instructor's hand-over controls (issue 9). A page that
// holds the server key shows one "hand over" button per tool of its
// session; pressing it sends HandOverTool, and the server answers with the
// tool's new controller token (the old one stops working and whoever drove
// the tool becomes an observer). The page turns the token into its usual
// shareable link (?session=N&role=controller&token=...) and shows it in a
// read-only field with a copy button, for the instructor to pass on.

const $ = (id) => document.getElementById(id);

export class HandOverControls {
  /**
   * client: SessionClient; linkFor(sessionId, token): the controller link;
   * onDone(result): after a hand-over ({toolId, link}) or a failure ({error}).
   */
  constructor(client, linkFor, onDone) {
    this.client = client;
    this.linkFor = linkFor;
    this.onDone = onDone;
    this.el = {
      section: $('handover'),
      list: $('ho-tools'),
      linkRow: $('ho-link-row'),
      link: $('ho-link'),
      copy: $('ho-copy'),
      status: $('ho-status'),
    };
    this.buttons = [];
    this.toolCount = 0;
    this.enabled = false;
    this.last = null;         // {toolId, link} of the last hand-over
    this.el.copy.addEventListener('click', () => this._copy());
  }

  /**
   * Shows the controls (server key holders in a session) for tools
   * 1..toolCount; ownToolId marks the page's own tool.
   */
  set(enabled, toolCount, ownToolId) {
    this.enabled = enabled;
    this.el.section.hidden = !enabled;
    if (!enabled) return;
    if (toolCount !== this.toolCount) {
      this.toolCount = toolCount;
      this.el.list.replaceChildren();
      this.buttons = [];
      for (let id = 1; id <= toolCount; id++) {
        const b = document.createElement('button');
        b.type = 'button';
        b.dataset.tool = String(id);
        b.addEventListener('click', () => this._handOver(id));
        this.el.list.appendChild(b);
        this.buttons.push(b);
      }
    }
    this.buttons.forEach((b, i) => {
      const id = i + 1;
      b.textContent = 'hand over tool ' + id + (id === ownToolId ? ' (yours)' : '');
      b.setAttribute('aria-label', 'hand over tool ' + id + ': make a new controller link for it');
    });
  }

  async _handOver(toolId) {
    const b = this.buttons[toolId - 1];
    if (b) b.disabled = true;
    try {
      const r = await this.client.handOverTool(toolId);
      const link = this.linkFor(r.sessionId, r.controllerToken);
      this.last = { toolId, link };
      this.el.link.value = link;
      this.el.linkRow.hidden = false;
      this.el.status.textContent = 'tool ' + toolId + ' handed over: send this link to its new controller';
      this.el.status.classList.remove('error-text');
      this.onDone?.(this.last);
    } catch (err) {
      this.el.status.textContent = 'hand-over failed: ' + err.message;
      this.el.status.classList.add('error-text');
      this.onDone?.({ error: err.message });
    } finally {
      if (b) b.disabled = false;
    }
  }

  async _copy() {
    const text = this.el.link.value;
    this.el.link.select();
    try {
      await navigator.clipboard.writeText(text);
      this.el.status.textContent = 'link copied';
    } catch {
      // no clipboard access (plain http, or refused): the link stays selected to copy by hand
      this.el.status.textContent = 'the link is selected: copy it with Ctrl+C';
    }
  }
}
