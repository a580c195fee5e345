// layers.js: the layers panel: one checkbox per layer of the tissue
// (Topology.layer_names, with its Topology.layer_triangle_counts), which
// shows or hides that layer in the view, so the mucosa, submucosa and
// muscularis can each be seen. Rebuilt when the topology changes; hidden
// layers stay hidden (the view remembers them by name).

const $ = (id) => document.getElementById(id);

export class LayersPanel {
  /**
   * view: TissueView (setLayerVisible, hiddenLayers); onChange(): after a
   * toggle; addControls(row, name, index): may add more controls to a
   * layer's row (the cut-away toggle).
   */
  constructor(view, onChange, addControls) {
    this.view = view;
    this.onChange = onChange;
    this.addControls = addControls;
    this.section = $('layers');
    this.list = $('ly-list');
    this.layers = [];   // [{name, triangles, visible}], read by the test hook
  }

  /** Builds the checkboxes for the topology's layer groups. */
  setTopology(topology) {
    this.list.replaceChildren();
    this.layers = [];
    const groups = topology ? topology.groups : [];
    groups.forEach((g, i) => {
      const visible = !(this.view && this.view.hiddenLayers.has(g.name));
      const layer = { name: g.name, triangles: g.count / 3, visible };
      this.layers.push(layer);
      const id = 'ly-' + i;
      const row = document.createElement('div');
      row.className = 'check';
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.id = id;
      box.checked = visible;
      box.dataset.layer = g.name;
      const label = document.createElement('label');
      label.htmlFor = id;
      label.textContent = g.name + ' ';
      const n = document.createElement('span');
      n.className = 'dim';
      n.textContent = '(' + layer.triangles.toLocaleString('en') + ' triangles)';
      label.appendChild(n);
      box.addEventListener('change', () => {
        layer.visible = box.checked;
        this.view?.setLayerVisible(g.name, box.checked);
        this.onChange?.();
      });
      row.append(box, label);
      this.addControls?.(row, g.name, i);
      this.list.appendChild(row);
    });
    this.section.hidden = groups.length === 0;
  }
}
