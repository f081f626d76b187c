-- Nothing is undone: the previous release reads neither the epoch nor
-- its triggers, and they must outlive a rollback. The servers of this
-- release that still run during one keep reading the epoch, which a
-- forget must go on moving (by either release's keys forget, or by hand);
-- and dropped and made again, it would start from 1, where entries
-- written before a forget would be read again.
SELECT 1;
