// cutaway.js: cut-away views of the layers. A layer marked "cut away" is
// clipped, with every layer above it (the ones before it in the topology's
// order: the mucosa lies over the submucosa over the muscularis), by a
// vertical plane through the controller's tool, or the tissue's centre for
// a watcher; the half towards the viewer's side (+z) is removed, so the
// layers below show in the cut. three.js local clipping: each clipped
// layer's materials get the plane in clippingPlanes, and the renderer has
// localClippingEnabled. The plane follows the tool on every frame by
// changing its constant only (no allocation).

import * as THREE from 'three';

export class CutAway {
  /** view: TissueView (renderer, mesh, wire, layerNames, geometry, dirty). */
  constructor(view) {
    this.view = view;
    this.cut = new Set();          // names of the layers marked "cut away"
    // keeps z <= constant: normal (0, 0, -1), signed distance -z + c
    this.plane = new THREE.Plane(new THREE.Vector3(0, 0, -1), 0);
    this.planes = [this.plane];
    this.none = [];
    this.clipped = [];             // names of the layers clipped now (read by the hook)
    view.renderer.localClippingEnabled = true;
  }

  /** Marks a layer cut away or not, and applies it. */
  setCut(name, on) {
    if (on) this.cut.add(name);
    else this.cut.delete(name);
    this.apply();
  }

  /** (Re)applies the planes to the current tissue's materials (after a new topology too). */
  apply() {
    const v = this.view;
    const names = v.layerNames;
    // the deepest layer marked: it and every layer above it are clipped
    let deepest = -1;
    names.forEach((n, i) => { if (this.cut.has(n)) deepest = i; });
    this.clipped = names.slice(0, deepest + 1);
    if (v.mesh) {
      for (let i = 0; i < names.length; i++) {
        const planes = i <= deepest ? this.planes : this.none;
        v.mesh.material[i].clippingPlanes = planes;
        if (v.wire) v.wire.material[i].clippingPlanes = planes;
      }
    }
    v.dirty = true;
  }

  /** Moves the plane through z (m): the tool's, or the tissue's centre when null. */
  follow(z) {
    let c = z;
    if (!Number.isFinite(c)) {
      const bb = this.view.geometry?.boundingBox;
      c = bb ? (bb.min.z + bb.max.z) / 2 : 0;
    }
    if (c !== this.plane.constant) {
      this.plane.constant = c;
      if (this.clipped.length) this.view.dirty = true;
    }
  }
}
