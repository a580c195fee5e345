/*
 * models.h: the stored learned models over the protocol (issue 6,
 * "Persistence"): ListModels, ExportModel, ImportModel, DeleteModel, and
 * UseShortcut.model_id, which installs a stored model in a quasi-static
 * session. The SQLite work runs as jobs on the background worker
 * (worker.h), as FitMaterial does (requests.c); the reply goes to the
 * requesting connection if it is still there when the job is done.
 *
 * The document is the one `tissuetool models export` writes, read and
 * written by the same code (tool/model_doc.h), so a model moves between
 * daemons (and the offline tool) as that JSON text.
 *
 * Rules:
 *   - a stored model is immutable. ImportModel stores the document as the
 *     next version of its (tissue, material, kind), as `tissuetool models
 *     import` does (the document's id and version are not kept: ids are the
 *     database's). Importing a model whose theta is bit for bit that of a
 *     stored model of the same tissue, material and kind stores nothing and
 *     answers with that stored model, so importing the same document twice
 *     gives one row, never an overwrite or a duplicate (the rule is
 *     ts_model_doc_find_stored, which `tissuetool models import` applies
 *     too);
 *   - DeleteModel removes the row only. A session that installed the model
 *     keeps running with its own copy of theta (sessions copy it at install
 *     time); only later sessions and UseShortcut no longer find it;
 *   - UseShortcut.model_id installs the model only in a session of the
 *     model's tissue (by name) and material identity (ts_learn_material_id,
 *     the string training stores the model under); otherwise TS_EMISMATCH
 *     naming both. A kind the daemon cannot run is TS_EUNSUPPORTED.
 * Loop thread (the request functions); the jobs' work runs on the worker.
 */
#ifndef TS_MODELS_H
#define TS_MODELS_H

#include <stdint.h>

#include "conn.h"
#include "session.h"
#include "tissue.pb-c.h"

/* ListModels: the models of one tissue (by name; TS_ENOTISSUE when there is
 * no such tissue) or of all (NULL or ""), in id order, as a ModelList. */
void ts_models_list(ts_conn *c, uint64_t rid, const char *tissue);

/* ExportModel: ModelDocument (info and the JSON document), or TS_ENOMODEL
 * when there is no model id. */
void ts_models_export(ts_conn *c, uint64_t rid, int64_t id);

/* ImportModel: parses and checks the document (TS_EINVAL with the reason
 * for a malformed one, TS_ETOOBIG past 64 KiB, TS_ENOTISSUE for a tissue not
 * in this daemon's catalog), stores it (see above) and answers with a
 * ModelList holding the stored model. */
void ts_models_import(ts_conn *c, uint64_t rid, const char *document);

/* DeleteModel: Ack "delete", or TS_ENOMODEL when there is no model id. */
void ts_models_delete(ts_conn *c, uint64_t rid, int64_t id);

/* UseShortcut with model_id != 0 in quasi-static session se (the caller
 * checked that c controls it): loads the model, checks it belongs to se's
 * tissue and material, and hands it to se's physics thread, which installs
 * it between two steps; the model then answers when `learned` (else the
 * solve does, until UseShortcut learned = true). Answered by Ack "learned"
 * or "solve", or an Error: TS_ENOMODEL (no such model), TS_EMISMATCH,
 * TS_EUNSUPPORTED, TS_ESTORAGE (a damaged row), TS_ENOSESSION (the session
 * ended meanwhile). */
void ts_models_use(ts_conn *c, uint64_t rid, ts_session *se, int64_t model_id, int learned);

#endif
