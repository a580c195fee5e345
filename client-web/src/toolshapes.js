// toolshapes.js: the three.js objects that draw the session's tools with
// the shape each frame's ToolState gives (kind, radius, length, jaw), so
// every participant sees the tools as the physics has them:
//   - sphere: a sphere of the tool's radius around pos;
//   - capsule: the segment from pos (the tip) up the tool axis (local +y,
//     turned by the orientation) for `length`, swept by the radius;
//   - jaws: a grasper, two jaw boxes (4 mm wide, 1.5 mm thick, `length`
//     long, 10 mm when 0) hinged at `length` up the axis and opened by
//     jaw * 60 degrees between them, with a shaft above the hinge; the same
//     boxes as server/core/ts_obb_tree.c's jaw_boxes.
// A tool's geometry is built when its kind or size changes, not per frame;
// per frame only its transform and the jaws' angle are set.

import * as THREE from 'three';

const JAW_WIDTH = 0.004;       // m (ts_default_tool_shape_def)
const JAW_THICKNESS = 0.0015;  // m
const JAW_MAX_ANGLE = Math.PI / 3;
const JAW_DEFAULT_LENGTH = 0.01;
const SHAFT_RADIUS = 0.0025;
const SHAFT_LENGTH = 0.04;
const DEFAULT_RADIUS = 0.005;

export const ToolKindName = Object.freeze({ 0: 'sphere', 1: 'capsule', 2: 'jaws' });

export class ToolShapes {
  /** scene: where the tools go; colours {own, other}: hex colours. */
  constructor(scene, colours) {
    this.scene = scene;
    this.colours = colours;
    this.tools = new Map();     // tool id -> { group, material, kind, radius, length, jaws }
    this.seen = new Set();      // reused each frame
    this.ownToolId = 0;
  }

  /** Places every tool of a frame's ToolState list; drops the ones gone. */
  update(states) {
    const seen = this.seen;
    seen.clear();
    for (const t of states) {
      seen.add(t.toolId);
      const kind = t.kind || 0;
      const radius = t.radius > 0 ? t.radius : DEFAULT_RADIUS;
      const length = t.length > 0 ? t.length : (kind === 2 ? JAW_DEFAULT_LENGTH : 0);
      let tool = this.tools.get(t.toolId);
      if (!tool) {
        const material = new THREE.MeshStandardMaterial({
          color: t.toolId === this.ownToolId ? this.colours.own : this.colours.other,
          roughness: 0.25, metalness: 0.6,
        });
        const group = new THREE.Group();
        group.name = 'tool ' + t.toolId;
        tool = { group, material, kind: -1, radius: 0, length: 0, jaws: null };
        this.tools.set(t.toolId, tool);
        this.scene.add(group);
      }
      if (tool.kind !== kind || tool.radius !== radius || tool.length !== length) {
        this._build(tool, kind, radius, length);
      }
      const p = t.position || {};
      tool.group.position.set(p.x || 0, p.y || 0, p.z || 0);
      const q = t.orientation;
      if (q && (q.w || q.x || q.y || q.z)) tool.group.quaternion.set(q.x || 0, q.y || 0, q.z || 0, q.w || 0).normalize();
      else tool.group.quaternion.identity();
      if (tool.jaws) {
        const jaw = Math.min(Math.max(Number.isFinite(t.jaw) ? t.jaw : 1, 0), 1);
        tool.jaw = jaw;
        tool.jaws[0].rotation.z = (jaw * JAW_MAX_ANGLE) / 2;
        tool.jaws[1].rotation.z = -(jaw * JAW_MAX_ANGLE) / 2;
      }
    }
    for (const [id, tool] of this.tools) if (!seen.has(id)) this._drop(id, tool);
  }

  _disposeParts(tool) {
    for (const child of [...tool.group.children]) {
      tool.group.remove(child);
      child.traverse((o) => { if (o.geometry) o.geometry.dispose(); });
    }
    tool.jaws = null;
  }

  _build(tool, kind, radius, length) {
    this._disposeParts(tool);
    tool.kind = kind;
    tool.radius = radius;
    tool.length = length;
    tool.group.userData = { kind, radius, length };
    const m = tool.material;
    if (kind === 1) {
      // CapsuleGeometry is centred on its segment: lift it so the tip is at pos
      const capsule = new THREE.Mesh(new THREE.CapsuleGeometry(radius, length, 8, 24), m);
      capsule.position.y = length / 2;
      capsule.name = 'capsule';
      tool.group.add(capsule);
    } else if (kind === 2) {
      tool.jaws = [];
      for (const s of [1, -1]) {
        const hinge = new THREE.Group();
        hinge.position.y = length;
        const box = new THREE.Mesh(new THREE.BoxGeometry(JAW_THICKNESS, length, JAW_WIDTH), m);
        box.position.set((s * JAW_THICKNESS) / 2, -length / 2, 0);
        box.name = 'jaw';
        hinge.add(box);
        tool.group.add(hinge);
        tool.jaws.push(hinge);
      }
      const shaft = new THREE.Mesh(new THREE.CylinderGeometry(SHAFT_RADIUS, SHAFT_RADIUS, SHAFT_LENGTH, 16), m);
      shaft.position.y = length + SHAFT_LENGTH / 2;
      shaft.name = 'shaft';
      tool.group.add(shaft);
    } else {
      const sphere = new THREE.Mesh(new THREE.SphereGeometry(radius, 32, 16), m);
      sphere.name = 'sphere';
      tool.group.add(sphere);
    }
  }

  _drop(id, tool) {
    this._disposeParts(tool);
    this.scene.remove(tool.group);
    tool.material.dispose();
    this.tools.delete(id);
  }

  /** Colours the page's own tool apart from the others. */
  setOwnTool(id) {
    this.ownToolId = id;
    for (const [tid, tool] of this.tools) tool.material.color.setHex(tid === id ? this.colours.own : this.colours.other);
  }

  /** Removes every tool (the page left its session). */
  clear() {
    for (const [id, tool] of this.tools) this._drop(id, tool);
  }

  /**
   * What is drawn, for the test hook: per tool its kind, size, the jaw
   * opening, the geometry types of its parts, its world-space bounding box
   * size and its position (the tip) in metres.
   */
  describe() {
    const out = [];
    const box = new THREE.Box3();
    const size = new THREE.Vector3();
    for (const [id, tool] of this.tools) {
      tool.group.updateMatrixWorld(true);
      box.setFromObject(tool.group);
      box.getSize(size);
      const parts = [];
      tool.group.traverse((o) => { if (o.geometry) parts.push(o.geometry.type); });
      out.push({ toolId: id, kind: ToolKindName[tool.kind] || String(tool.kind), radius: tool.radius,
        length: tool.length, jaw: tool.jaws ? tool.jaw : null, parts, size: [size.x, size.y, size.z],
        position: tool.group.position.toArray() });
    }
    return out;
  }
}
