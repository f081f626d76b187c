package gen

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"net/url"
	"testing"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/randvalue"
)

var (
	_ = http.MethodPost
	_ url.Values
)

func TestFingerprintWritersMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 200 {
		{
			var request UpdateMyApplicationRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateMyApplicationFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_my_application", nil, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateMyApplication, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateApplicationRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateApplicationFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_application", idem.Params{"application_id": request.ApplicationId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateApplication, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UploadApplicationAttachmentRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			var multipartParts []idem.MultipartPart
			randvalue.Fill(r, &multipartParts)
			got, gotErr := uploadApplicationAttachmentFingerprint(ctx, request, multipartParts)
			want, wantErr := idem.Fingerprint("upload_application_attachment", idem.Params{"application_id": request.ApplicationId}, nil, nil, multipartParts, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UploadApplicationAttachment, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateApplicationCommandRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createApplicationCommandFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_application_command", idem.Params{"application_id": request.ApplicationId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateApplicationCommand, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request BulkSetApplicationCommandsRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := bulkSetApplicationCommandsFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("bulk_set_application_commands", idem.Params{"application_id": request.ApplicationId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("BulkSetApplicationCommands, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteApplicationCommandRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteApplicationCommandFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_application_command", idem.Params{"application_id": request.ApplicationId, "command_id": request.CommandId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteApplicationCommand, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateApplicationCommandRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateApplicationCommandFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_application_command", idem.Params{"application_id": request.ApplicationId, "command_id": request.CommandId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateApplicationCommand, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateApplicationEmojiRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createApplicationEmojiFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_application_emoji", idem.Params{"application_id": request.ApplicationId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateApplicationEmoji, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteApplicationEmojiRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteApplicationEmojiFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_application_emoji", idem.Params{"application_id": request.ApplicationId, "emoji_id": request.EmojiId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteApplicationEmoji, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateApplicationEmojiRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateApplicationEmojiFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_application_emoji", idem.Params{"application_id": request.ApplicationId, "emoji_id": request.EmojiId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateApplicationEmoji, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateEntitlementRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createEntitlementFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_entitlement", idem.Params{"application_id": request.ApplicationId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateEntitlement, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteEntitlementRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteEntitlementFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_entitlement", idem.Params{"application_id": request.ApplicationId, "entitlement_id": request.EntitlementId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteEntitlement, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request ConsumeEntitlementRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := consumeEntitlementFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("consume_entitlement", idem.Params{"application_id": request.ApplicationId, "entitlement_id": request.EntitlementId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("ConsumeEntitlement, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateGuildApplicationCommandRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createGuildApplicationCommandFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_guild_application_command", idem.Params{"application_id": request.ApplicationId, "guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateGuildApplicationCommand, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request BulkSetGuildApplicationCommandsRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := bulkSetGuildApplicationCommandsFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("bulk_set_guild_application_commands", idem.Params{"application_id": request.ApplicationId, "guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("BulkSetGuildApplicationCommands, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteGuildApplicationCommandRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteGuildApplicationCommandFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_guild_application_command", idem.Params{"application_id": request.ApplicationId, "guild_id": request.GuildId, "command_id": request.CommandId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteGuildApplicationCommand, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateGuildApplicationCommandRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateGuildApplicationCommandFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_guild_application_command", idem.Params{"application_id": request.ApplicationId, "guild_id": request.GuildId, "command_id": request.CommandId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateGuildApplicationCommand, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request SetGuildApplicationCommandPermissionsRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := setGuildApplicationCommandPermissionsFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("set_guild_application_command_permissions", idem.Params{"application_id": request.ApplicationId, "guild_id": request.GuildId, "command_id": request.CommandId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("SetGuildApplicationCommandPermissions, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateApplicationRoleConnectionsMetadataRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateApplicationRoleConnectionsMetadataFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_application_role_connections_metadata", idem.Params{"application_id": request.ApplicationId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateApplicationRoleConnectionsMetadata, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteChannelRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteChannelFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_channel", idem.Params{"channel_id": request.ChannelId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteChannel, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateChannelRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateChannelFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_channel", idem.Params{"channel_id": request.ChannelId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateChannel, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request FollowChannelRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := followChannelFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("follow_channel", idem.Params{"channel_id": request.ChannelId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("FollowChannel, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateChannelInviteRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			var multipartParts []idem.MultipartPart
			randvalue.Fill(r, &multipartParts)
			got, gotErr := createChannelInviteFingerprint(ctx, request, multipartParts)
			want, wantErr := idem.Fingerprint("create_channel_invite", idem.Params{"channel_id": request.ChannelId}, nil, nil, idem.Params{"JSON": request.JSONBody, "Formdata": idem.PostForm(ctx), "Multipart": multipartParts}, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateChannelInvite, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateMessageRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			var multipartParts []idem.MultipartPart
			randvalue.Fill(r, &multipartParts)
			got, gotErr := createMessageFingerprint(ctx, request, multipartParts)
			want, wantErr := idem.Fingerprint("create_message", idem.Params{"channel_id": request.ChannelId}, nil, nil, idem.Params{"JSON": request.JSONBody, "Formdata": idem.PostForm(ctx), "Multipart": multipartParts}, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateMessage, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request BulkDeleteMessagesRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := bulkDeleteMessagesFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("bulk_delete_messages", idem.Params{"channel_id": request.ChannelId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("BulkDeleteMessages, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeletePinRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deletePinFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_pin", idem.Params{"channel_id": request.ChannelId, "message_id": request.MessageId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeletePin, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreatePinRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createPinFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_pin", idem.Params{"channel_id": request.ChannelId, "message_id": request.MessageId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreatePin, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteMessageRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteMessageFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_message", idem.Params{"channel_id": request.ChannelId, "message_id": request.MessageId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteMessage, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateMessageRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			var multipartParts []idem.MultipartPart
			randvalue.Fill(r, &multipartParts)
			got, gotErr := updateMessageFingerprint(ctx, request, multipartParts)
			want, wantErr := idem.Fingerprint("update_message", idem.Params{"channel_id": request.ChannelId, "message_id": request.MessageId}, nil, nil, idem.Params{"JSON": request.JSONBody, "Formdata": idem.PostForm(ctx), "Multipart": multipartParts}, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateMessage, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CrosspostMessageRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := crosspostMessageFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("crosspost_message", idem.Params{"channel_id": request.ChannelId, "message_id": request.MessageId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CrosspostMessage, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteAllMessageReactionsRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteAllMessageReactionsFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_all_message_reactions", idem.Params{"channel_id": request.ChannelId, "message_id": request.MessageId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteAllMessageReactions, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteAllMessageReactionsByEmojiRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteAllMessageReactionsByEmojiFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_all_message_reactions_by_emoji", idem.Params{"channel_id": request.ChannelId, "message_id": request.MessageId, "emoji_name": request.EmojiName}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteAllMessageReactionsByEmoji, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteMyMessageReactionRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteMyMessageReactionFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_my_message_reaction", idem.Params{"channel_id": request.ChannelId, "message_id": request.MessageId, "emoji_name": request.EmojiName}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteMyMessageReaction, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request AddMyMessageReactionRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := addMyMessageReactionFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("add_my_message_reaction", idem.Params{"channel_id": request.ChannelId, "message_id": request.MessageId, "emoji_name": request.EmojiName}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("AddMyMessageReaction, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteUserMessageReactionRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteUserMessageReactionFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_user_message_reaction", idem.Params{"channel_id": request.ChannelId, "message_id": request.MessageId, "emoji_name": request.EmojiName, "user_id": request.UserId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteUserMessageReaction, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateThreadFromMessageRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createThreadFromMessageFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_thread_from_message", idem.Params{"channel_id": request.ChannelId, "message_id": request.MessageId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateThreadFromMessage, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteChannelPermissionOverwriteRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteChannelPermissionOverwriteFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_channel_permission_overwrite", idem.Params{"channel_id": request.ChannelId, "overwrite_id": request.OverwriteId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteChannelPermissionOverwrite, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request SetChannelPermissionOverwriteRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := setChannelPermissionOverwriteFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("set_channel_permission_overwrite", idem.Params{"channel_id": request.ChannelId, "overwrite_id": request.OverwriteId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("SetChannelPermissionOverwrite, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeprecatedDeletePinRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deprecatedDeletePinFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("deprecated_delete_pin", idem.Params{"channel_id": request.ChannelId, "message_id": request.MessageId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeprecatedDeletePin, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeprecatedCreatePinRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deprecatedCreatePinFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("deprecated_create_pin", idem.Params{"channel_id": request.ChannelId, "message_id": request.MessageId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeprecatedCreatePin, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request PollExpireRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := pollExpireFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("poll_expire", idem.Params{"channel_id": request.ChannelId, "message_id": request.MessageId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("PollExpire, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteGroupDmUserRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteGroupDmUserFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_group_dm_user", idem.Params{"channel_id": request.ChannelId, "user_id": request.UserId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteGroupDmUser, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request AddGroupDmUserRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := addGroupDmUserFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("add_group_dm_user", idem.Params{"channel_id": request.ChannelId, "user_id": request.UserId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("AddGroupDmUser, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request SendSoundboardSoundRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := sendSoundboardSoundFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("send_soundboard_sound", idem.Params{"channel_id": request.ChannelId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("SendSoundboardSound, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request LeaveThreadRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := leaveThreadFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("leave_thread", idem.Params{"channel_id": request.ChannelId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("LeaveThread, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request JoinThreadRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := joinThreadFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("join_thread", idem.Params{"channel_id": request.ChannelId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("JoinThread, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteThreadMemberRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteThreadMemberFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_thread_member", idem.Params{"channel_id": request.ChannelId, "user_id": request.UserId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteThreadMember, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request AddThreadMemberRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := addThreadMemberFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("add_thread_member", idem.Params{"channel_id": request.ChannelId, "user_id": request.UserId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("AddThreadMember, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateThreadRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			var multipartParts []idem.MultipartPart
			randvalue.Fill(r, &multipartParts)
			got, gotErr := createThreadFingerprint(ctx, request, multipartParts)
			want, wantErr := idem.Fingerprint("create_thread", idem.Params{"channel_id": request.ChannelId}, nil, nil, idem.Params{"JSON": request.JSONBody, "Formdata": idem.PostForm(ctx), "Multipart": multipartParts}, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateThread, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request TriggerTypingIndicatorRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := triggerTypingIndicatorFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("trigger_typing_indicator", idem.Params{"channel_id": request.ChannelId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("TriggerTypingIndicator, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateVoiceChannelStatusRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateVoiceChannelStatusFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_voice_channel_status", idem.Params{"channel_id": request.ChannelId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateVoiceChannelStatus, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateWebhookRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createWebhookFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_webhook", idem.Params{"channel_id": request.ChannelId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateWebhook, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateGuildRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateGuildFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_guild", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateGuild, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateAutoModerationRuleRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createAutoModerationRuleFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_auto_moderation_rule", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateAutoModerationRule, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteAutoModerationRuleRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteAutoModerationRuleFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_auto_moderation_rule", idem.Params{"guild_id": request.GuildId, "rule_id": request.RuleId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteAutoModerationRule, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateAutoModerationRuleRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateAutoModerationRuleFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_auto_moderation_rule", idem.Params{"guild_id": request.GuildId, "rule_id": request.RuleId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateAutoModerationRule, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UnbanUserFromGuildRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := unbanUserFromGuildFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("unban_user_from_guild", idem.Params{"guild_id": request.GuildId, "user_id": request.UserId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UnbanUserFromGuild, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request BanUserFromGuildRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := banUserFromGuildFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("ban_user_from_guild", idem.Params{"guild_id": request.GuildId, "user_id": request.UserId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("BanUserFromGuild, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request BulkBanUsersFromGuildRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := bulkBanUsersFromGuildFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("bulk_ban_users_from_guild", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("BulkBanUsersFromGuild, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request BulkUpdateGuildChannelsRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := bulkUpdateGuildChannelsFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("bulk_update_guild_channels", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("BulkUpdateGuildChannels, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateGuildChannelRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createGuildChannelFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_guild_channel", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateGuildChannel, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateGuildEmojiRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createGuildEmojiFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_guild_emoji", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateGuildEmoji, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteGuildEmojiRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteGuildEmojiFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_guild_emoji", idem.Params{"guild_id": request.GuildId, "emoji_id": request.EmojiId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteGuildEmoji, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateGuildEmojiRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateGuildEmojiFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_guild_emoji", idem.Params{"guild_id": request.GuildId, "emoji_id": request.EmojiId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateGuildEmoji, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateGuildIncidentActionsRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateGuildIncidentActionsFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_guild_incident_actions", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateGuildIncidentActions, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteGuildIntegrationRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteGuildIntegrationFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_guild_integration", idem.Params{"guild_id": request.GuildId, "integration_id": request.IntegrationId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteGuildIntegration, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateMyGuildMemberRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateMyGuildMemberFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_my_guild_member", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateMyGuildMember, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteGuildMemberRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteGuildMemberFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_guild_member", idem.Params{"guild_id": request.GuildId, "user_id": request.UserId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteGuildMember, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateGuildMemberRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateGuildMemberFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_guild_member", idem.Params{"guild_id": request.GuildId, "user_id": request.UserId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateGuildMember, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request AddGuildMemberRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := addGuildMemberFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("add_guild_member", idem.Params{"guild_id": request.GuildId, "user_id": request.UserId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("AddGuildMember, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteGuildMemberRoleRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteGuildMemberRoleFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_guild_member_role", idem.Params{"guild_id": request.GuildId, "user_id": request.UserId, "role_id": request.RoleId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteGuildMemberRole, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request AddGuildMemberRoleRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := addGuildMemberRoleFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("add_guild_member_role", idem.Params{"guild_id": request.GuildId, "user_id": request.UserId, "role_id": request.RoleId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("AddGuildMemberRole, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request PutGuildsOnboardingRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := putGuildsOnboardingFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("put_guilds_onboarding", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("PutGuildsOnboarding, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request PruneGuildRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := pruneGuildFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("prune_guild", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("PruneGuild, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request ActionGuildJoinRequestRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := actionGuildJoinRequestFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("action_guild_join_request", idem.Params{"guild_id": request.GuildId, "request_id": request.RequestId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("ActionGuildJoinRequest, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request BulkUpdateGuildRolesRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := bulkUpdateGuildRolesFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("bulk_update_guild_roles", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("BulkUpdateGuildRoles, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateGuildRoleRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createGuildRoleFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_guild_role", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateGuildRole, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteGuildRoleRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteGuildRoleFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_guild_role", idem.Params{"guild_id": request.GuildId, "role_id": request.RoleId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteGuildRole, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateGuildRoleRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateGuildRoleFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_guild_role", idem.Params{"guild_id": request.GuildId, "role_id": request.RoleId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateGuildRole, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateGuildScheduledEventRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createGuildScheduledEventFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_guild_scheduled_event", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateGuildScheduledEvent, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteGuildScheduledEventRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteGuildScheduledEventFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_guild_scheduled_event", idem.Params{"guild_id": request.GuildId, "guild_scheduled_event_id": request.GuildScheduledEventId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteGuildScheduledEvent, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateGuildScheduledEventRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateGuildScheduledEventFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_guild_scheduled_event", idem.Params{"guild_id": request.GuildId, "guild_scheduled_event_id": request.GuildScheduledEventId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateGuildScheduledEvent, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateGuildScheduledEventExceptionRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createGuildScheduledEventExceptionFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_guild_scheduled_event_exception", idem.Params{"guild_id": request.GuildId, "guild_scheduled_event_id": request.GuildScheduledEventId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateGuildScheduledEventException, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteGuildScheduledEventExceptionRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteGuildScheduledEventExceptionFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_guild_scheduled_event_exception", idem.Params{"guild_id": request.GuildId, "guild_scheduled_event_id": request.GuildScheduledEventId, "exception_id": request.ExceptionId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteGuildScheduledEventException, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateGuildScheduledEventExceptionRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateGuildScheduledEventExceptionFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_guild_scheduled_event_exception", idem.Params{"guild_id": request.GuildId, "guild_scheduled_event_id": request.GuildScheduledEventId, "exception_id": request.ExceptionId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateGuildScheduledEventException, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateGuildSoundboardSoundRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createGuildSoundboardSoundFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_guild_soundboard_sound", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateGuildSoundboardSound, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteGuildSoundboardSoundRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteGuildSoundboardSoundFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_guild_soundboard_sound", idem.Params{"guild_id": request.GuildId, "sound_id": request.SoundId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteGuildSoundboardSound, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateGuildSoundboardSoundRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateGuildSoundboardSoundFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_guild_soundboard_sound", idem.Params{"guild_id": request.GuildId, "sound_id": request.SoundId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateGuildSoundboardSound, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateGuildStickerRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			var multipartParts []idem.MultipartPart
			randvalue.Fill(r, &multipartParts)
			got, gotErr := createGuildStickerFingerprint(ctx, request, multipartParts)
			want, wantErr := idem.Fingerprint("create_guild_sticker", idem.Params{"guild_id": request.GuildId}, nil, nil, multipartParts, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateGuildSticker, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteGuildStickerRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteGuildStickerFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_guild_sticker", idem.Params{"guild_id": request.GuildId, "sticker_id": request.StickerId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteGuildSticker, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateGuildStickerRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateGuildStickerFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_guild_sticker", idem.Params{"guild_id": request.GuildId, "sticker_id": request.StickerId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateGuildSticker, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateGuildTemplateRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createGuildTemplateFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_guild_template", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateGuildTemplate, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteGuildTemplateRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteGuildTemplateFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_guild_template", idem.Params{"guild_id": request.GuildId, "code": request.Code}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteGuildTemplate, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateGuildTemplateRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateGuildTemplateFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_guild_template", idem.Params{"guild_id": request.GuildId, "code": request.Code}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateGuildTemplate, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request SyncGuildTemplateRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := syncGuildTemplateFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("sync_guild_template", idem.Params{"guild_id": request.GuildId, "code": request.Code}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("SyncGuildTemplate, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateSelfVoiceStateRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateSelfVoiceStateFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_self_voice_state", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateSelfVoiceState, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateVoiceStateRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateVoiceStateFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_voice_state", idem.Params{"guild_id": request.GuildId, "user_id": request.UserId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateVoiceState, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateGuildWelcomeScreenRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateGuildWelcomeScreenFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_guild_welcome_screen", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateGuildWelcomeScreen, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateGuildWidgetSettingsRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateGuildWidgetSettingsFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_guild_widget_settings", idem.Params{"guild_id": request.GuildId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateGuildWidgetSettings, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateInteractionResponseRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			var multipartParts []idem.MultipartPart
			randvalue.Fill(r, &multipartParts)
			got, gotErr := createInteractionResponseFingerprint(ctx, request, multipartParts)
			want, wantErr := idem.Fingerprint("create_interaction_response", idem.Params{"interaction_id": request.InteractionId, "interaction_token": request.InteractionToken}, idem.Params{"with_response": request.Params.WithResponse}, nil, idem.Params{"JSON": request.JSONBody, "Formdata": idem.PostForm(ctx), "Multipart": multipartParts}, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateInteractionResponse, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request InviteRevokeRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := inviteRevokeFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("invite_revoke", idem.Params{"code": request.Code}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("InviteRevoke, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateInviteTargetUsersRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			var multipartParts []idem.MultipartPart
			randvalue.Fill(r, &multipartParts)
			got, gotErr := updateInviteTargetUsersFingerprint(ctx, request, multipartParts)
			want, wantErr := idem.Fingerprint("update_invite_target_users", idem.Params{"code": request.Code}, nil, nil, multipartParts, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateInviteTargetUsers, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateLobbyRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createLobbyFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_lobby", nil, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateLobby, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateOrJoinLobbyRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createOrJoinLobbyFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_or_join_lobby", nil, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateOrJoinLobby, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteLobbyRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteLobbyFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_lobby", idem.Params{"lobby_id": request.LobbyId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteLobby, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request EditLobbyRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := editLobbyFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("edit_lobby", idem.Params{"lobby_id": request.LobbyId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("EditLobby, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request EditLobbyChannelLinkRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := editLobbyChannelLinkFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("edit_lobby_channel_link", idem.Params{"lobby_id": request.LobbyId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("EditLobbyChannelLink, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request LeaveLobbyRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := leaveLobbyFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("leave_lobby", idem.Params{"lobby_id": request.LobbyId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("LeaveLobby, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateLinkedLobbyGuildInviteForSelfRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createLinkedLobbyGuildInviteForSelfFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_linked_lobby_guild_invite_for_self", idem.Params{"lobby_id": request.LobbyId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateLinkedLobbyGuildInviteForSelf, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request BulkUpdateLobbyMembersRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := bulkUpdateLobbyMembersFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("bulk_update_lobby_members", idem.Params{"lobby_id": request.LobbyId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("BulkUpdateLobbyMembers, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteLobbyMemberRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteLobbyMemberFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_lobby_member", idem.Params{"lobby_id": request.LobbyId, "user_id": request.UserId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteLobbyMember, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request AddLobbyMemberRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := addLobbyMemberFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("add_lobby_member", idem.Params{"lobby_id": request.LobbyId, "user_id": request.UserId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("AddLobbyMember, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateLinkedLobbyGuildInviteForUserRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createLinkedLobbyGuildInviteForUserFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_linked_lobby_guild_invite_for_user", idem.Params{"lobby_id": request.LobbyId, "user_id": request.UserId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateLinkedLobbyGuildInviteForUser, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateLobbyMessageRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			var multipartParts []idem.MultipartPart
			randvalue.Fill(r, &multipartParts)
			got, gotErr := createLobbyMessageFingerprint(ctx, request, multipartParts)
			want, wantErr := idem.Fingerprint("create_lobby_message", idem.Params{"lobby_id": request.LobbyId}, nil, nil, idem.Params{"JSON": request.JSONBody, "Formdata": idem.PostForm(ctx), "Multipart": multipartParts}, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateLobbyMessage, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateLobbyMessageExternalModerationMetadataRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			var multipartParts []idem.MultipartPart
			randvalue.Fill(r, &multipartParts)
			got, gotErr := updateLobbyMessageExternalModerationMetadataFingerprint(ctx, request, multipartParts)
			want, wantErr := idem.Fingerprint("update_lobby_message_external_moderation_metadata", idem.Params{"lobby_id": request.LobbyId, "message_id": request.MessageId}, nil, nil, idem.Params{"JSON": request.JSONBody, "Formdata": idem.PostForm(ctx), "Multipart": multipartParts}, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateLobbyMessageExternalModerationMetadata, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateUserMessageExternalModerationMetadataRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			var multipartParts []idem.MultipartPart
			randvalue.Fill(r, &multipartParts)
			got, gotErr := updateUserMessageExternalModerationMetadataFingerprint(ctx, request, multipartParts)
			want, wantErr := idem.Fingerprint("update_user_message_external_moderation_metadata", idem.Params{"user_id_1": request.UserId1, "user_id_2": request.UserId2, "message_id": request.MessageId}, nil, nil, idem.Params{"JSON": request.JSONBody, "Formdata": idem.PostForm(ctx), "Multipart": multipartParts}, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateUserMessageExternalModerationMetadata, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request PartnerSdkUnmergeProvisionalAccountRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := partnerSdkUnmergeProvisionalAccountFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("partner_sdk_unmerge_provisional_account", nil, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("PartnerSdkUnmergeProvisionalAccount, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request BotPartnerSdkUnmergeProvisionalAccountRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := botPartnerSdkUnmergeProvisionalAccountFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("bot_partner_sdk_unmerge_provisional_account", nil, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("BotPartnerSdkUnmergeProvisionalAccount, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request PartnerSdkTokenRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := partnerSdkTokenFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("partner_sdk_token", nil, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("PartnerSdkToken, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request BotPartnerSdkTokenRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := botPartnerSdkTokenFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("bot_partner_sdk_token", nil, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("BotPartnerSdkToken, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateStageInstanceRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createStageInstanceFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_stage_instance", nil, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateStageInstance, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteStageInstanceRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteStageInstanceFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_stage_instance", idem.Params{"channel_id": request.ChannelId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteStageInstance, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateStageInstanceRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateStageInstanceFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_stage_instance", idem.Params{"channel_id": request.ChannelId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateStageInstance, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateMyUserRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateMyUserFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_my_user", nil, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateMyUser, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteApplicationUserRoleConnectionRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteApplicationUserRoleConnectionFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_application_user_role_connection", idem.Params{"application_id": request.ApplicationId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteApplicationUserRoleConnection, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateApplicationUserRoleConnectionRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateApplicationUserRoleConnectionFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_application_user_role_connection", idem.Params{"application_id": request.ApplicationId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateApplicationUserRoleConnection, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request CreateDmRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := createDmFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("create_dm", nil, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("CreateDm, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request LeaveGuildRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := leaveGuildFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("leave_guild", idem.Params{"guild_id": request.GuildId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("LeaveGuild, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteWebhookRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteWebhookFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_webhook", idem.Params{"webhook_id": request.WebhookId}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteWebhook, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateWebhookRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateWebhookFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_webhook", idem.Params{"webhook_id": request.WebhookId}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateWebhook, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteWebhookByTokenRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteWebhookByTokenFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_webhook_by_token", idem.Params{"webhook_id": request.WebhookId, "webhook_token": request.WebhookToken}, nil, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteWebhookByToken, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateWebhookByTokenRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := updateWebhookByTokenFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("update_webhook_by_token", idem.Params{"webhook_id": request.WebhookId, "webhook_token": request.WebhookToken}, nil, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateWebhookByToken, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request ExecuteWebhookRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			var multipartParts []idem.MultipartPart
			randvalue.Fill(r, &multipartParts)
			got, gotErr := executeWebhookFingerprint(ctx, request, multipartParts)
			want, wantErr := idem.Fingerprint("execute_webhook", idem.Params{"webhook_id": request.WebhookId, "webhook_token": request.WebhookToken}, idem.Params{"wait": request.Params.Wait, "thread_id": request.Params.ThreadId, "with_components": request.Params.WithComponents}, nil, idem.Params{"JSON": request.JSONBody, "Formdata": idem.PostForm(ctx), "Multipart": multipartParts}, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("ExecuteWebhook, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request ExecuteGithubCompatibleWebhookRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := executeGithubCompatibleWebhookFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("execute_github_compatible_webhook", idem.Params{"webhook_id": request.WebhookId, "webhook_token": request.WebhookToken}, idem.Params{"wait": request.Params.Wait, "thread_id": request.Params.ThreadId}, nil, request.Body, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("ExecuteGithubCompatibleWebhook, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteOriginalWebhookMessageRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteOriginalWebhookMessageFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_original_webhook_message", idem.Params{"webhook_id": request.WebhookId, "webhook_token": request.WebhookToken}, idem.Params{"thread_id": request.Params.ThreadId}, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteOriginalWebhookMessage, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateOriginalWebhookMessageRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			var multipartParts []idem.MultipartPart
			randvalue.Fill(r, &multipartParts)
			got, gotErr := updateOriginalWebhookMessageFingerprint(ctx, request, multipartParts)
			want, wantErr := idem.Fingerprint("update_original_webhook_message", idem.Params{"webhook_id": request.WebhookId, "webhook_token": request.WebhookToken}, idem.Params{"thread_id": request.Params.ThreadId, "with_components": request.Params.WithComponents}, nil, idem.Params{"JSON": request.JSONBody, "Formdata": idem.PostForm(ctx), "Multipart": multipartParts}, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateOriginalWebhookMessage, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request DeleteWebhookMessageRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			got, gotErr := deleteWebhookMessageFingerprint(ctx, request)
			want, wantErr := idem.Fingerprint("delete_webhook_message", idem.Params{"webhook_id": request.WebhookId, "webhook_token": request.WebhookToken, "message_id": request.MessageId}, idem.Params{"thread_id": request.Params.ThreadId}, nil, nil, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("DeleteWebhookMessage, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request UpdateWebhookMessageRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			var multipartParts []idem.MultipartPart
			randvalue.Fill(r, &multipartParts)
			got, gotErr := updateWebhookMessageFingerprint(ctx, request, multipartParts)
			want, wantErr := idem.Fingerprint("update_webhook_message", idem.Params{"webhook_id": request.WebhookId, "webhook_token": request.WebhookToken, "message_id": request.MessageId}, idem.Params{"thread_id": request.Params.ThreadId, "with_components": request.Params.WithComponents}, nil, idem.Params{"JSON": request.JSONBody, "Formdata": idem.PostForm(ctx), "Multipart": multipartParts}, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("UpdateWebhookMessage, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
		{
			var request ExecuteSlackCompatibleWebhookRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{PostForm: form})
			var multipartParts []idem.MultipartPart
			randvalue.Fill(r, &multipartParts)
			got, gotErr := executeSlackCompatibleWebhookFingerprint(ctx, request, multipartParts)
			want, wantErr := idem.Fingerprint("execute_slack_compatible_webhook", idem.Params{"webhook_id": request.WebhookId, "webhook_token": request.WebhookToken}, idem.Params{"wait": request.Params.Wait, "thread_id": request.Params.ThreadId}, nil, idem.Params{"JSON": request.JSONBody, "Formdata": idem.PostForm(ctx), "Multipart": multipartParts}, nil)
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("ExecuteSlackCompatibleWebhook, request %d %#v: writer %x (error %v), idem.Fingerprint %x (error %v)", i, request, got, gotErr, want, wantErr)
			}
		}
	}
}
