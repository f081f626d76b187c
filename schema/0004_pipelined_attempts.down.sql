DROP FUNCTION IF EXISTS idemgen_start_phase(bigint, bigint, text, text, text, integer, bigint);
DROP FUNCTION IF EXISTS idemgen_claim(bigint, bigint, text, text, text, integer, boolean);
