-- Where an artifact's payload lies in the file's raw copy (raw/<sha256>, which the store keeps for
-- every file): the byte offset of its record's envelope line and the length up to the line that
-- ended its payload. Set, with payload_z left null, for a plain TORCH_TRACE read as it is kept; a
-- gzipped one cannot be read at an offset and keeps its payloads compressed in payload_z.
ALTER TABLE artifacts ADD COLUMN raw_offset BIGINT;
ALTER TABLE artifacts ADD COLUMN raw_length BIGINT;
