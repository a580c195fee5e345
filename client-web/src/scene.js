// scene.js: the three.js view of a session: the tissue mesh (one draw group
// and colour per layer, each of which can be hidden), the tools in their
// shapes (toolshapes.js), lights, a camera with OrbitControls, and the render loop.
//
// The tissue geometry owns its position and normal arrays, made once per
// topology: a frame is copied into the same position array (the stream's
// positions, decoded here or handed over by the decode worker, are another
// array), the normals are recomputed into the same normal array, and both
// are flagged for upload, so the GPU buffers are updated in place and a
// frame allocates nothing. That work is done once per animation frame that
// has a new tissue frame to draw (frames arriving faster than the display
// refreshes are not copied twice); `stats` counts it for the tests and
// tests/bench/web_render.mjs.
// Scene units are metres; the patch is 0.08 m across.

import * as THREE from 'three';
import { OrbitControls } from 'three/addons/controls/OrbitControls.js';
import { ToolShapes } from './toolshapes.js';

const LAYER_COLOURS = {
  mucosa: 0xe89a9a,      // pinkish
  submucosa: 0xf2e2b0,   // pale yellow
  muscularis: 0x9e2a2b,  // deep red
};
const FALLBACK_COLOURS = [0xc9a0dc, 0x9ac8e8, 0xb0d8a8, 0xd8c8a0];
const OWN_TOOL_COLOUR = 0x5fa8ff;
const OTHER_TOOL_COLOUR = 0xb8c2cc;

export class TissueView {
  /** container: the element the canvas goes into. Throws without WebGL. */
  constructor(container) {
    this.container = container;
    this.renderer = new THREE.WebGLRenderer({ antialias: true });
    this.renderer.setPixelRatio(Math.min(window.devicePixelRatio || 1, 2));
    this.renderer.setClearColor(0x1d2127);
    container.appendChild(this.renderer.domElement);
    this.canvas = this.renderer.domElement;

    this.scene = new THREE.Scene();
    this.camera = new THREE.PerspectiveCamera(45, 1, 0.002, 2);
    this.camera.position.set(0, 0.12, 0.09);
    this.camera.lookAt(0, 0, 0);

    this.scene.add(new THREE.HemisphereLight(0xfff4ee, 0x30343c, 1.1));
    // A key light from low on one side so that dents cast visible shading.
    const key = new THREE.DirectionalLight(0xffffff, 2.0);
    key.position.set(0.12, 0.09, 0.05);
    this.scene.add(key);
    const rim = new THREE.DirectionalLight(0x9fb8ff, 0.5);
    rim.position.set(-0.1, 0.05, -0.1);
    this.scene.add(rim);

    const grid = new THREE.GridHelper(0.16, 16, 0x3a414b, 0x2b3038);
    grid.position.y = -0.012;
    this.scene.add(grid);

    this.controls = new OrbitControls(this.camera, this.canvas);
    this.controls.target.set(0, 0, 0);
    this.controls.enableDamping = true;
    this.controls.minDistance = 0.03;
    this.controls.maxDistance = 0.6;
    // The left button drives the tool; the right button orbits (shift+right
    // pans), the wheel and middle button zoom. ctrl+left also orbits: the
    // pointer code switches LEFT to PAN for that press, which OrbitControls
    // turns into a rotation while ctrl is held.
    this.controls.mouseButtons = { LEFT: null, MIDDLE: THREE.MOUSE.DOLLY, RIGHT: THREE.MOUSE.ROTATE };
    this.controls.update();

    this.mesh = null;
    this.wire = null;
    this.geometry = null;
    this.toolShapes = new ToolShapes(this.scene, { own: OWN_TOOL_COLOUR, other: OTHER_TOOL_COLOUR });
    this.layerNames = [];   // the tissue's layers, in Topology order
    this.hiddenLayers = new Set(); // names of the layers not drawn (kept across topologies)
    this.ownToolId = 0;
    this.normalsEvery = 1;
    this.frameCounter = 0;
    this.pending = null;    // the stream whose latest frame is not uploaded yet
    // frames: tissue frames handed to update(); drawn: animation frames that
    // drew a new one; renders: all renders; uploadMs/renderMs: main-thread
    // time of the upload (copy, normals, bounds) and of the render calls
    this.stats = { frames: 0, drawn: 0, renders: 0, uploadMs: 0, renderMs: 0 };
    this.dirty = true;

    this.raycaster = new THREE.Raycaster();
    this._onResize = () => this.resize();
    window.addEventListener('resize', this._onResize);
    this.resize();
    this.renderer.setAnimationLoop(() => this._tick());
  }

  resize() {
    const w = this.container.clientWidth || window.innerWidth;
    const h = this.container.clientHeight || window.innerHeight;
    this.renderer.setSize(w, h, false);
    this.camera.aspect = w / Math.max(h, 1);
    this.camera.updateProjectionMatrix();
    this.dirty = true;
  }

  /** Builds the tissue mesh for a stream's (new) topology and buffers. */
  setTopology(stream) {
    if (this.mesh) {
      this.scene.remove(this.mesh);
      this.geometry.dispose();
      for (const m of this.mesh.material) m.dispose();
      for (const m of this.wire.material) m.dispose();
    }
    const g = new THREE.BufferGeometry();
    const pos = new THREE.BufferAttribute(Float32Array.from(stream.positions), 3);
    pos.setUsage(THREE.DynamicDrawUsage);
    g.setAttribute('position', pos);
    const normals = new THREE.BufferAttribute(new Float32Array(stream.positions.length), 3);
    normals.setUsage(THREE.DynamicDrawUsage);
    g.setAttribute('normal', normals);
    g.setIndex(new THREE.BufferAttribute(stream.topology.triangles, 1));
    const materials = [];
    const wires = [];
    let fallback = 0;
    this.layerNames = [];
    for (const group of stream.topology.groups) {
      const colour = LAYER_COLOURS[group.name] ?? FALLBACK_COLOURS[fallback++ % FALLBACK_COLOURS.length];
      g.addGroup(group.start, group.count, materials.length);
      const visible = !this.hiddenLayers.has(group.name);
      materials.push(new THREE.MeshStandardMaterial({
        color: colour, roughness: 0.55, metalness: 0.0, side: THREE.DoubleSide, visible,
      }));
      // A faint wireframe per layer, hidden with it.
      wires.push(new THREE.MeshBasicMaterial({
        color: 0x2a0d10, wireframe: true, transparent: true, opacity: 0.12, depthWrite: false, visible,
      }));
      this.layerNames.push(group.name);
    }
    vertexNormals(pos.array, stream.topology.triangles, normals.array);
    g.computeBoundingSphere();
    g.computeBoundingBox();
    this.geometry = g;
    this.mesh = new THREE.Mesh(g, materials);
    this.mesh.name = 'tissue';
    this.scene.add(this.mesh);
    // A faint wireframe over the same geometry (no copy of the positions)
    // makes small deformations readable.
    this.wire = new THREE.Mesh(g, wires);
    this.wire.renderOrder = 1;
    this.mesh.add(this.wire);
    // Large meshes: recompute normals every other frame.
    this.normalsEvery = stream.vertexCount > 20000 ? 2 : 1;
    this.pending = null;
    this.dirty = true;
  }

  /**
   * Called after the stream applied a frame: the tissue is updated at the
   * next animation frame (the latest frame then), the tools now.
   */
  update(stream) {
    if (this.geometry) {
      this.pending = stream;
      this.stats.frames++;
    }
    this.toolShapes.update(stream.tools);
    this.dirty = true;
  }

  /** Copies the pending frame into the geometry's own arrays (in place). */
  _upload() {
    const stream = this.pending;
    this.pending = null;
    const pos = this.geometry.attributes.position;
    // the stream was reset since (a new join: no frame yet), or a topology
    // change is on its way: nothing of this frame to draw
    if (!stream.positions || stream.positions.length !== pos.array.length) return;
    pos.array.set(stream.positions);
    pos.needsUpdate = true;
    if (++this.frameCounter % this.normalsEvery === 0) {
      const nor = this.geometry.attributes.normal;
      vertexNormals(pos.array, this.geometry.index.array, nor.array);
      nor.needsUpdate = true;
    }
    this.geometry.computeBoundingBox();
    this.geometry.computeBoundingSphere();
  }

  /** Removes the tissue and the tools (the page left its session). */
  clear() {
    if (this.mesh) {
      this.scene.remove(this.mesh);
      this.geometry.dispose();
      for (const m of this.mesh.material) m.dispose();
      for (const m of this.wire.material) m.dispose();
      this.mesh = null;
      this.wire = null;
      this.geometry = null;
    }
    this.pending = null;
    this.toolShapes.clear();
    this.layerNames = [];
    this.dirty = true;
  }

  /**
   * Shows or hides every draw group of the layer called `name` (a
   * Topology.layer_names entry); the choice outlives topology changes.
   */
  setLayerVisible(name, visible) {
    if (visible) this.hiddenLayers.delete(name);
    else this.hiddenLayers.add(name);
    if (this.mesh) {
      for (let i = 0; i < this.layerNames.length; i++) {
        if (this.layerNames[i] !== name) continue;
        this.mesh.material[i].visible = visible;
        this.wire.material[i].visible = visible;
      }
    }
    this.dirty = true;
  }

  setOwnTool(id) {
    this.ownToolId = id;
    this.toolShapes.setOwnTool(id);
    this.dirty = true;
  }

  /**
   * The point on the tissue under canvas pixel (x, y) (client coordinates),
   * or where the ray meets the plane y = planeY when it misses the tissue or
   * when `planeOnly` is set. Returns a THREE.Vector3 or null.
   */
  pick(clientX, clientY, planeY = 0, planeOnly = false) {
    const rect = this.canvas.getBoundingClientRect();
    const ndc = new THREE.Vector2(
      ((clientX - rect.left) / rect.width) * 2 - 1,
      -((clientY - rect.top) / rect.height) * 2 + 1);
    this.raycaster.setFromCamera(ndc, this.camera);
    if (!planeOnly && this.mesh) {
      const hits = this.raycaster.intersectObject(this.mesh, false);
      if (hits.length) return hits[0].point.clone();
    }
    const plane = new THREE.Plane(new THREE.Vector3(0, 1, 0), -planeY);
    const p = new THREE.Vector3();
    return this.raycaster.ray.intersectPlane(plane, p) ? p : null;
  }

  /**
   * The layer drawn first under canvas pixel (x, y) (client coordinates):
   * the nearest tissue triangle whose layer is shown and not clipped by the
   * cut-away plane, as {name, distance (m from the camera), facing (its
   * winding faces the camera: seen from its outer side)}, or null. The test
   * hook's layerAt: hiding a layer must show the next one's outer face.
   */
  layerAt(clientX, clientY) {
    if (!this.mesh) return null;
    const rect = this.canvas.getBoundingClientRect();
    const ndc = new THREE.Vector2(
      ((clientX - rect.left) / rect.width) * 2 - 1,
      -((clientY - rect.top) / rect.height) * 2 + 1);
    this.raycaster.setFromCamera(ndc, this.camera);
    const hits = this.raycaster.intersectObject(this.mesh, false);
    for (const h of hits) {
      const m = this.mesh.material[h.face.materialIndex];
      if (!m || !m.visible) continue;
      if ((m.clippingPlanes || []).some((pl) => pl.distanceToPoint(h.point) < 0)) continue;
      return {
        name: this.layerNames[h.face.materialIndex],
        distance: h.distance,
        facing: h.face.normal.dot(this.raycaster.ray.direction) < 0,
      };
    }
    return null;
  }

  /** The ray from the camera through canvas pixel (x, y): {origin, direction} as {x, y, z}. */
  rayAt(clientX, clientY) {
    const rect = this.canvas.getBoundingClientRect();
    const ndc = new THREE.Vector2(
      ((clientX - rect.left) / rect.width) * 2 - 1,
      -((clientY - rect.top) / rect.height) * 2 + 1);
    this.raycaster.setFromCamera(ndc, this.camera);
    const o = this.raycaster.ray.origin, d = this.raycaster.ray.direction;
    return { origin: { x: o.x, y: o.y, z: o.z }, direction: { x: d.x, y: d.y, z: d.z } };
  }

  _tick() {
    const moved = this.controls.update();
    if (moved || this.dirty) {
      const st = this.stats;
      const fresh = this.pending !== null && this.geometry !== null;
      const t0 = performance.now();
      if (fresh) this._upload();
      const t1 = performance.now();
      this.renderer.render(this.scene, this.camera);
      const t2 = performance.now();
      if (fresh) {
        st.drawn++;
        st.uploadMs += t1 - t0;
      }
      st.renders++;
      st.renderMs += t2 - t1;
      this.dirty = false;
    }
  }
}

/**
 * Area-weighted vertex normals of the triangles `index` over `pos` (xyz
 * floats) into `out` (same length as pos), normalised; a vertex on no
 * triangle gets (0, 0, 0). No allocation (three's computeVertexNormals makes
 * vectors on every call and reads through accessors).
 */
export function vertexNormals(pos, index, out) {
  out.fill(0);
  for (let t = 0; t < index.length; t += 3) {
    const a = 3 * index[t], b = 3 * index[t + 1], c = 3 * index[t + 2];
    const ux = pos[b] - pos[a], uy = pos[b + 1] - pos[a + 1], uz = pos[b + 2] - pos[a + 2];
    const vx = pos[c] - pos[a], vy = pos[c + 1] - pos[a + 1], vz = pos[c + 2] - pos[a + 2];
    const nx = uy * vz - uz * vy, ny = uz * vx - ux * vz, nz = ux * vy - uy * vx;
    out[a] += nx; out[a + 1] += ny; out[a + 2] += nz;
    out[b] += nx; out[b + 1] += ny; out[b + 2] += nz;
    out[c] += nx; out[c + 1] += ny; out[c + 2] += nz;
  }
  for (let i = 0; i < out.length; i += 3) {
    const l = Math.sqrt(out[i] * out[i] + out[i + 1] * out[i + 1] + out[i + 2] * out[i + 2]);
    if (l > 0) {
      out[i] /= l; out[i + 1] /= l; out[i + 2] /= l;
    }
  }
}
